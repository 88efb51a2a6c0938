"""Commands run as a person runs them in a shell: a process, its output as text, a time limit;
and `chattts-online run` started as `make run` starts it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[2]


def command(
    argv: Sequence[str], cwd: Path, env: Mapping[str, str], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """`argv` run to its end in `cwd` with `env`; its exit status and output, as text."""
    return subprocess.run(
        list(argv), cwd=cwd, env=dict(env), capture_output=True, text=True, timeout=timeout
    )


def run_env(tmp_path: Path, **settings: str) -> dict[str, str]:
    """This process's environment for a `run` of its own: no Redis or service URL inherited,
    eSpeak NG, its data and its announcement (`cli/running.py`) under `tmp_path`; `settings`
    on top."""
    env = {k: v for k, v in os.environ.items() if "REDIS_URL" not in k and k != "CHATTTS_URL"}
    env |= {
        "CHATTTS_ENGINE": "espeak",
        "CHATTTS_DATA_DIR": str(tmp_path / "data"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }
    return env | settings


def start_run(port: int, env: Mapping[str, str], log: IO[bytes]) -> subprocess.Popen[bytes]:
    """`chattts-online run --port port` from the checkout, its output into `log`."""
    return subprocess.Popen(
        [sys.executable, "-m", "cli", "run", "--port", str(port)],
        cwd=ROOT,
        env=dict(env),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
