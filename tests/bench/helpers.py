"""Running a benchmark module as its own process, the way the suite does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 240


def run_quick(module: str, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m <module> --quick --output <out> <args>` in the repository; never raises on
    its exit status (the tests look at it)."""
    return subprocess.run(
        [sys.executable, "-m", module, "--quick", "--output", str(out), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
