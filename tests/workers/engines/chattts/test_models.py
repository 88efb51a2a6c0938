"""`chattts-online models pull|verify|info` through the real command, against a local server
speaking the Hub's protocol (hub.py) that serves the tiny checkpoint as 2Noise/ChatTTS."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.workers.engines.chattts.hub import FakeHub
from workers.engines.base import EngineError
from workers.engines.chattts.loading import stamp
from workers.engines.chattts.loading.loader import ASSET_FILES, MANIFEST, resolve_root
from workers.engines.chattts.loading.models import expected_checksums, published_checksums


@pytest.fixture
def hub(tiny_checkpoint: Path) -> Iterator[FakeHub]:
    server = FakeHub(tiny_checkpoint).start()
    yield server
    server.stop()


def models(hub: FakeHub, home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The command; a pull of the random-weight checkpoint trusts its manifest, handed over
    from this disk (`--checksums`) as an operator would, never taken from the download."""
    if args and args[0] == "pull" and "--official" not in args:
        args = (*args, "--checksums", str(hub.root / MANIFEST))
    args = tuple(a for a in args if a != "--official")
    environment = {
        **os.environ,
        "HF_ENDPOINT": hub.url,
        "HF_HOME": str(home),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        **env,
    }
    environment.pop("CHATTTS_MODEL_DIR", None)
    environment.update(env)
    return subprocess.run(
        [sys.executable, "-m", "cli", "models", *args],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


def downloads(hub: FakeHub, relative: str) -> list[str]:
    """The Range headers of the GETs of one file ('' for a whole-file GET)."""
    return [r for m, path, r in hub.requests if m == "GET" and path.endswith("/" + relative)]


def test_pull_verify_info_into_the_model_dir(
    hub: FakeHub, tiny_checkpoint: Path, tmp_path: Path
) -> None:
    target = tmp_path / "models"
    pulled = models(hub, tmp_path / "hf", "pull", CHATTTS_MODEL_DIR=str(target))
    assert pulled.returncode == 0, pulled.stderr
    for relative in ASSET_FILES:
        assert (target / relative).read_bytes() == (tiny_checkpoint / relative).read_bytes()
        assert f"ok       {relative}" in pulled.stdout
    verified = models(hub, tmp_path / "hf", "verify", CHATTTS_MODEL_DIR=str(target))
    assert verified.returncode == 0 and "CORRUPT" not in verified.stdout
    info = models(hub, tmp_path / "hf", "info", CHATTTS_MODEL_DIR=str(target))
    assert info.returncode == 0, info.stderr
    assert "asset/gpt/model.safetensors" in info.stdout and "total" in info.stdout
    assert "engine auto would use: chattts" in info.stdout
    # A second pull finds everything in place: no file is downloaded again.
    gets = len([r for r in hub.requests if r[0] == "GET" and "/resolve/" in r[1]])
    again = models(hub, tmp_path / "hf", "pull", CHATTTS_MODEL_DIR=str(target))
    assert again.returncode == 0, again.stderr
    assert len([r for r in hub.requests if r[0] == "GET" and "/resolve/" in r[1]]) == gets


def test_a_download_never_vouches_for_itself(hub: FakeHub, tmp_path: Path) -> None:
    """The mirror serves random weights with a manifest of their own checksums: a pull takes
    the weights, not the manifest, and checks them against ChatTTS's published checksums."""
    assert MANIFEST in hub.files()
    target = tmp_path / "models"
    pulled = models(hub, tmp_path / "hf", "pull", "--official", CHATTTS_MODEL_DIR=str(target))
    assert pulled.returncode == 1, pulled.stdout
    assert "ChatTTS's published checksums" in pulled.stdout and "CORRUPT" in pulled.stdout
    assert not (target / MANIFEST).exists()
    assert not [r for r in hub.requests if r[1].endswith("/" + MANIFEST)]
    verified = models(hub, tmp_path / "hf", "verify", CHATTTS_MODEL_DIR=str(target))
    assert verified.returncode == 1 and "CORRUPT" in verified.stdout


def test_a_dropped_connection_resumes_where_it_stopped(hub: FakeHub, tmp_path: Path) -> None:
    big = "asset/Embed.safetensors"  # 19 MB in the tiny checkpoint
    cut = 15_000_000  # past the client's first 10 MB chunk: what it keeps of the cut transfer
    hub.drop_after[big] = cut
    target = tmp_path / "models"
    first = models(hub, tmp_path / "hf", "pull", CHATTTS_MODEL_DIR=str(target))
    if first.returncode != 0:  # the client gave up on the cut: the next run resumes
        assert "resumes" in first.stderr
        second = models(hub, tmp_path / "hf", "pull", CHATTTS_MODEL_DIR=str(target))
        assert second.returncode == 0, second.stderr
    # The file came in two requests, the second from what the first had stored.
    ranges = downloads(hub, big)
    assert len(ranges) == 2 and ranges[0] == "" and ranges[1].startswith("bytes="), ranges
    resumed_at = int(ranges[1][6:].split("-")[0])
    assert 0 < resumed_at <= cut, ranges
    assert models(hub, tmp_path / "hf", "verify", CHATTTS_MODEL_DIR=str(target)).returncode == 0


def test_a_corrupted_file_is_named_and_the_good_ones_stay(hub: FakeHub, tmp_path: Path) -> None:
    bad = "asset/DVAE.safetensors"
    hub.corrupt.add(bad)
    target = tmp_path / "models"
    pulled = models(hub, tmp_path / "hf", "pull", CHATTTS_MODEL_DIR=str(target))
    assert pulled.returncode == 1
    assert f"CORRUPT  {bad}: sha256" in pulled.stdout
    assert "1 file(s) need fetching again" in pulled.stdout
    for relative in ASSET_FILES:
        assert (target / relative).is_file()  # kept where it is: nothing renamed
    assert not list(target.rglob("*.bak"))
    assert models(hub, tmp_path / "hf", "verify", CHATTTS_MODEL_DIR=str(target)).returncode == 1


def test_offline_the_complete_cache_answers_without_a_request(hub: FakeHub, tmp_path: Path) -> None:
    home = tmp_path / "hf"
    pulled = models(hub, home, "pull")  # no CHATTTS_MODEL_DIR: the Hugging Face cache
    assert pulled.returncode == 0, pulled.stderr
    assert "set CHATTTS_MODEL_DIR=" in pulled.stdout
    before = len(hub.requests)
    offline = models(hub, home, "pull", HF_HUB_OFFLINE="1")
    assert offline.returncode == 0, offline.stderr
    assert len(hub.requests) == before  # not one request
    # The cache as CHATTTS_MODEL_DIR: the worker's loader finds the snapshot in it.
    assert (resolve_root(str(home / "hub")) / "asset" / "DVAE.safetensors").is_file()


def test_missing_weights_point_at_models_pull(tmp_path: Path) -> None:
    for where in (None, str(tmp_path / "nowhere"), str(tmp_path)):
        with pytest.raises(EngineError, match="models pull"):
            resolve_root(where)


def test_the_published_checksums_are_chattts_own() -> None:
    spec = importlib.util.find_spec("ChatTTS")  # found, not imported (no torch here)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("the chattts extra is not installed")
    theirs = Path(next(iter(spec.submodule_search_locations))) / "res" / "sha256_map.json"
    assert published_checksums() == json.loads(theirs.read_text())


def test_a_verified_copy_is_stamped_and_any_change_voids_the_stamp(
    hub: FakeHub, tmp_path: Path
) -> None:
    target = tmp_path / "models"
    assert models(hub, tmp_path / "hf", "pull", CHATTTS_MODEL_DIR=str(target)).returncode == 0
    expected, _ = expected_checksums(target)
    assert stamp.is_fresh(target, ASSET_FILES, expected)  # workers load without hashing
    assert not stamp.is_fresh(target, ASSET_FILES, {**expected, "x": "y"})  # other checksums
    victim = target / "asset" / "DVAE.safetensors"
    data = bytearray(victim.read_bytes())
    data[-1] ^= 0xFF  # same size, new content (and mtime)
    victim.write_bytes(bytes(data))
    assert not stamp.is_fresh(target, ASSET_FILES, expected)
    verified = models(hub, tmp_path / "hf", "verify", CHATTTS_MODEL_DIR=str(target))
    assert verified.returncode == 1 and "CORRUPT  asset/DVAE.safetensors" in verified.stdout
