"""The random-weight ChatTTS checkpoints the benchmarks run (`full`: the real architecture, about
1 GB; `tiny`), built once in the temporary directory and shared by every benchmark."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from bench.lib.cli import REPO_ROOT


def random_checkpoint(
    size: str = "full", tokens: int | None = None, root: Path | None = None
) -> Path:
    """A random checkpoint of `size` whose rows never end: each runs exactly `tokens` (None: the
    model's own budget). Built in `root` (default: the temporary directory) when absent."""
    sys.path.insert(0, str(REPO_ROOT))
    from workers.engines.chattts.loading.checkpoint import MANIFEST, build_checkpoint

    if root is None:
        name = f"chattts-online-bench-{size}" + (f"-{tokens}" if tokens else "")
        root = Path(os.environ.get("TMPDIR", "/tmp")) / name
    if not (root / MANIFEST).is_file():
        print(f"building the {size} random checkpoint in {root} ...", flush=True)
        started = time.perf_counter()
        build_checkpoint(root, size, max_new_token=tokens, shape_eos=False)
        print(f"built in {time.perf_counter() - started:.0f} s", flush=True)
    return root
