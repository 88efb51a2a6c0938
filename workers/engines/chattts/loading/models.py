"""ChatTTS weights set up for the engine: fetched (`pull`), checked without loading (`verify`),
described (`info`). Behind `chattts-online models`; imports neither torch nor ChatTTS.

Downloads go through `huggingface_hub` (resumable, HF_ENDPOINT mirrors, its progress bars, its
cache), or ModelScope's client where asked. Files are then checked against ChatTTS's published
checksums (`data/sha256_map.json`, the copy of ChatTTS 0.2.5's `res/sha256_map.json`; a test
keeps them equal) or against a custom checkpoint's own manifest. A file that does not match is
named and left where it is: never renamed to `.bak` as ChatTTS's own loader does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from workers.engines.base import EngineError
from workers.engines.chattts.loading import stamp
from workers.engines.chattts.loading.loader import (
    ASSET_FILES,
    MANIFEST,
    checksum_key,
    published_checksums,
    resolve_root,
    sha256_file,
)

REPO_ID = "2Noise/ChatTTS"
MODELSCOPE_REPO_ID = "pzc163/chatTTS"
# What ChatTTS's own loader fetches is pinned by content, not by commit: a revision of the repo
# is accepted when every file matches the published checksums. `--revision` pins a commit too.
DEFAULT_REVISION = "main"
# The files a checkpoint needs, and nothing else: a manifest (its own checksums and config) from
# a download would let a mirror or a moved revision vouch for itself. A custom checkpoint's
# manifest comes from the operator (`models pull --checksums`), never from the download.
PULL_PATTERNS = list(ASSET_FILES)
Source = Literal["huggingface", "modelscope"]
FileState = Literal["ok", "missing", "corrupt"]


@dataclass(frozen=True)
class FileCheck:
    path: str  # relative to the checkpoint root
    state: FileState
    size: int = 0
    expected: str = ""
    actual: str = ""


def expected_checksums(root: Path) -> tuple[dict[str, str], str]:
    """The checksums a checkpoint must match, and whose they are."""
    manifest = root / MANIFEST
    if manifest.is_file():
        doc = json.loads(manifest.read_text("utf-8"))
        return {str(k): str(v) for k, v in doc["sha256"].items()}, str(
            doc.get("description") or "a custom checkpoint's manifest"
        )
    return published_checksums(), "ChatTTS's published checksums"


def verify(root: Path, trust_stamp: bool = False) -> list[FileCheck]:
    """Every file of the checkpoint at `root`, hashed against its expected checksum.
    `trust_stamp`: files unchanged since a verification (stamp.py) are not hashed again."""
    expected, _ = expected_checksums(root)
    if trust_stamp and stamp.is_fresh(root, ASSET_FILES, expected):
        return [FileCheck(r, "ok", (root / r).stat().st_size) for r in ASSET_FILES]
    checks = []
    for relative in ASSET_FILES:
        path = root / relative
        want = expected.get(checksum_key(relative), "")
        if not path.is_file():
            checks.append(FileCheck(relative, "missing", expected=want))
            continue
        got = sha256_file(path)
        state: FileState = "ok" if got == want else "corrupt"
        checks.append(FileCheck(relative, state, path.stat().st_size, want, got))
    if all(check.state == "ok" for check in checks):
        stamp.write(root, ASSET_FILES, expected)  # workers then load without hashing again
    return checks


def pull(
    model_dir: str | None,
    revision: str = DEFAULT_REVISION,
    source: Source = "huggingface",
    checksums: Path | None = None,
) -> Path:
    """Fetch the checkpoint into `model_dir` (None: the Hugging Face cache) and return its root.
    A complete copy that matches its checksums needs no request at all (an init step may run
    this on every start); otherwise it resumes where an earlier pull stopped, and offline
    (HF_HUB_OFFLINE=1) it answers from the cache without a request. `checksums`: a custom
    checkpoint's manifest that the operator trusts, placed beside the files."""
    root = _download(model_dir, revision, source)
    if checksums is not None:
        try:
            doc = json.loads(checksums.read_text("utf-8"))
            if not isinstance(doc.get("sha256"), dict):
                raise ValueError("it has no sha256 table")
        except (OSError, ValueError, AttributeError) as exc:
            message = f"--checksums {checksums}: not a checkpoint manifest ({exc})"
            raise EngineError(message) from exc
        (root / MANIFEST).write_text(json.dumps(doc, indent=2), "utf-8")
    return root


def _download(model_dir: str | None, revision: str, source: Source) -> Path:
    if model_dir and _complete(model_dir):
        return resolve_root(model_dir)
    if source == "modelscope":
        try:
            from modelscope import snapshot_download as modelscope_download
        except ImportError:
            raise EngineError(
                "--source modelscope needs ModelScope's client: pip install modelscope"
            ) from None
        path = modelscope_download(
            MODELSCOPE_REPO_ID, revision=revision, local_dir=model_dir, allow_patterns=PULL_PATTERNS
        )
        return Path(path)
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        path = snapshot_download(
            REPO_ID,
            revision=revision,
            allow_patterns=PULL_PATTERNS,
            local_dir=model_dir if model_dir and _is_local_dir(model_dir) else None,
            cache_dir=model_dir if model_dir and not _is_local_dir(model_dir) else None,
        )
    except LocalEntryNotFoundError as exc:
        raise EngineError(f"the weights are not in the cache, and it is offline: {exc}") from exc
    return Path(path)


def _complete(model_dir: str) -> bool:
    try:
        root = resolve_root(model_dir)
    except EngineError:
        return False
    return all(check.state == "ok" for check in verify(root, trust_stamp=True))


def _is_local_dir(model_dir: str) -> bool:
    """A directory meant to hold `asset/` itself, rather than a Hugging Face cache: one that
    has an `asset/` tree or nothing at all that looks like a cache."""
    base = Path(model_dir)
    if (base / "asset").is_dir():
        return True
    return not any(p.name.startswith("models--") for p in base.glob("*")) if base.is_dir() else True
