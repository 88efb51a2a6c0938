"""Commands run as a person runs them in a shell: a process, its output as text, a time limit."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path


def command(
    argv: Sequence[str], cwd: Path, env: Mapping[str, str], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """`argv` run to its end in `cwd` with `env`; its exit status and output, as text."""
    return subprocess.run(
        list(argv), cwd=cwd, env=dict(env), capture_output=True, text=True, timeout=timeout
    )
