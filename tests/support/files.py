"""Files for tests: a checkpoint linked, not copied."""

from __future__ import annotations

import shutil
from pathlib import Path

from workers.engines.chattts.loading.loader import (
    ASSET_FILES,
    MANIFEST,
)


def link_copy(src: Path, dst: Path, skip: str | None = None, copy: str | None = None) -> Path:
    """A checkpoint whose files are symlinks to `src` (one skipped, one really copied)."""
    for relative in (*ASSET_FILES, MANIFEST):
        if relative == skip:
            continue
        target = dst / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if relative == copy:
            shutil.copyfile(src / relative, target)
        else:
            target.symlink_to(src / relative)
    return dst
