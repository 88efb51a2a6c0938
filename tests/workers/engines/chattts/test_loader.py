"""The production loader: checkpoint layouts, checksums, missing files, devices."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.infra.settings import Settings
from tests.support.files import link_copy
from tests.workers.engines.chattts.conftest import requires_chattts
from workers.engines.base import EngineError
from workers.engines.chattts.loading.loader import (
    MANIFEST,
    find_weights,
    locate,
    resolve_root,
)

pytestmark = pytest.mark.chattts


def test_find_weights_explains_what_is_missing(tiny_checkpoint: Path, tmp_path: Path) -> None:
    assert find_weights(str(tiny_checkpoint)) is None
    assert "CHATTTS_MODEL_DIR is not set" in (find_weights(None) or "")
    assert "not a directory" in (find_weights(str(tmp_path / "nope")) or "")
    assert "no ChatTTS checkpoint" in (find_weights(str(tmp_path)) or "")
    broken = link_copy(tiny_checkpoint, tmp_path / "m", skip="asset/gpt/model.safetensors")
    problem = find_weights(str(broken)) or ""
    assert "missing" in problem and str(broken / "asset/gpt/model.safetensors") in problem


def test_hugging_face_cache_layout(tiny_checkpoint: Path, tmp_path: Path) -> None:
    repo = tmp_path / "hub" / "models--2Noise--ChatTTS"
    snapshot = link_copy(tiny_checkpoint, repo / "snapshots" / "abc123")
    link_copy(tiny_checkpoint, repo / "snapshots" / "old999")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    for model_dir in (tmp_path, tmp_path / "hub", repo):
        assert resolve_root(str(model_dir)) == snapshot
        assert find_weights(str(model_dir)) is None


def test_manifest_errors_are_named(tiny_checkpoint: Path, tmp_path: Path) -> None:
    model = link_copy(tiny_checkpoint, tmp_path / "m", skip=MANIFEST)
    (model / MANIFEST).write_text("{not json")
    with pytest.raises(EngineError, match=MANIFEST):
        locate(str(model))


@requires_chattts
def test_load_names_a_missing_file(tiny_checkpoint: Path, tmp_path: Path) -> None:
    from workers.engines.chattts.engine import ChatTTSEngine

    model = link_copy(tiny_checkpoint, tmp_path / "m", skip="asset/Vocos.safetensors")
    engine = ChatTTSEngine(Settings.of(model_dir=str(model), device="cpu"))
    with pytest.raises(EngineError, match=r"missing.*Vocos\.safetensors"):
        engine.load()


@requires_chattts
def test_load_names_a_corrupt_file(tiny_checkpoint: Path, tmp_path: Path) -> None:
    from workers.engines.chattts.engine import ChatTTSEngine

    model = link_copy(tiny_checkpoint, tmp_path / "m", copy="asset/DVAE.safetensors")
    data = bytearray((model / "asset/DVAE.safetensors").read_bytes())
    data[-1] ^= 0xFF
    (model / "asset/DVAE.safetensors").write_bytes(bytes(data))
    engine = ChatTTSEngine(Settings.of(model_dir=str(model), device="cpu"))
    with pytest.raises(EngineError, match=r"corrupt.*DVAE\.safetensors"):
        engine.load()


@requires_chattts
def test_without_a_manifest_the_published_checksums_apply(
    tiny_checkpoint: Path, tmp_path: Path
) -> None:
    from workers.engines.chattts.engine import ChatTTSEngine

    model = link_copy(tiny_checkpoint, tmp_path / "m", skip=MANIFEST)
    engine = ChatTTSEngine(Settings.of(model_dir=str(model), device="cpu"))
    with pytest.raises(EngineError, match=r"sha256 mismatch.*Decoder\.safetensors") as info:
        engine.load()
    import ChatTTS

    published = json.loads((Path(ChatTTS.__file__).parent / "res" / "sha256_map.json").read_text())
    assert published["sha256_asset_Decoder_safetensors"] in str(info.value)


@requires_chattts
@pytest.mark.parametrize("device", ["tpu", "cuda:x", "cuda:99"])
def test_unusable_devices_are_refused(device: str) -> None:
    import torch

    from workers.engines.chattts.loading.loader import resolve_device

    if device == "cuda:99" or not torch.cuda.is_available():
        with pytest.raises(EngineError, match=r"device|CUDA"):
            resolve_device(device)
    assert resolve_device("cpu").type == "cpu"
    assert resolve_device("auto").type in ("cpu", "cuda")
