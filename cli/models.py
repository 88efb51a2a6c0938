"""`chattts-online models pull|verify|info`: ChatTTS weights fetched, checked and described
(workers/engines/chattts/loading/models.py), in CHATTTS_MODEL_DIR or the Hugging Face cache."""

from __future__ import annotations

import sys
from pathlib import Path

from cli.errors import FAILED, OK
from core.infra.settings import Settings
from workers.engines.base import EngineError
from workers.engines.chattts.loading import models
from workers.engines.chattts.loading.loader import MANIFEST, resolve_root


def _report(root: Path, trust_stamp: bool = False) -> bool:
    """Print each file's check; True when all match (`trust_stamp`: a pull, whose complete
    copy was just verified, does not hash it a second time)."""
    checks = models.verify(root, trust_stamp)
    _, whose = models.expected_checksums(root)
    print(f"checkpoint {root} (checked against {whose}):")
    for check in checks:
        if check.state == "ok":
            print(f"  ok       {check.path} ({check.size / 1e6:.1f} MB)")
        elif check.state == "missing":
            print(f"  MISSING  {check.path}")
        else:
            print(f"  CORRUPT  {check.path}: sha256 {check.actual}, expected {check.expected}")
    bad = [c.path for c in checks if c.state != "ok"]
    if bad:
        print(f"{len(bad)} file(s) need fetching again: chattts-online models pull")
    return not bad


def pull(
    settings: Settings, revision: str, source: models.Source, checksums: Path | None = None
) -> int:
    try:
        root = models.pull(settings.engine.model_dir, revision, source, checksums)
    except EngineError as exc:
        print(f"chattts-online models pull: {exc}", file=sys.stderr)
        return FAILED
    except ImportError as exc:  # the downloader comes with the chattts extra
        print(
            f"chattts-online models pull: {exc.name or exc} is not installed: it comes with "
            "ChatTTS (make install-chattts, or pip install 'chattts-online[chattts]')",
            file=sys.stderr,
        )
        return FAILED
    except Exception as exc:  # the hub client's errors: network, 404, a dropped connection
        print(
            f"chattts-online models pull: {type(exc).__name__}: {exc} (run it again: it resumes)",
            file=sys.stderr,
        )
        return FAILED
    ok = _report(root, trust_stamp=True)
    if ok and not settings.engine.model_dir:
        print(f"set CHATTTS_MODEL_DIR={root} for the worker")
    return OK if ok else FAILED


def verify(settings: Settings) -> int:
    try:
        root = resolve_root(settings.engine.model_dir)
    except EngineError as exc:
        print(f"chattts-online models verify: {exc}", file=sys.stderr)
        return FAILED
    return OK if _report(root) else FAILED


def info(settings: Settings) -> int:
    try:
        root = resolve_root(settings.engine.model_dir)
    except EngineError as exc:
        print(f"no checkpoint: {exc}")
        print(
            f"engine auto would use espeak; `chattts-online models pull` fetches {models.REPO_ID}"
        )
        return FAILED
    _, whose = models.expected_checksums(root)
    total = 0
    print(f"checkpoint {root} ({whose}):")
    for relative in models.PULL_PATTERNS:
        path = root / relative
        if path.is_file():
            size = path.stat().st_size
            total += size
            print(f"  {relative:45} {size / 1e6:10.1f} MB")
        elif relative != MANIFEST:
            print(f"  {relative:45} {'missing':>13}")
    print(f"  {'total':45} {total / 1e6:10.1f} MB")
    from workers.engines import create_engine

    engine = create_engine(settings.replace(engine="auto", model_dir=str(root)))
    print(f"engine auto would use: {engine.name}")
    return OK
