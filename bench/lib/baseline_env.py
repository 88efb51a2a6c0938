"""The baseline design (bench/baseline/): where it is, its own virtualenv, how to run it. It runs in
its own interpreter, with its own requirements; nothing of it is imported here."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
# Where it lives: bench/baseline/ in this repository; CHATTTS_BASELINE_DIR names another copy of
# the same design (the one the project started from, say) to measure instead.
DIR_ENV = "CHATTTS_BASELINE_DIR"
DEFAULT_DIR = Path(os.environ.get(DIR_ENV) or REPO_ROOT / "bench" / "baseline")
_FILES = ("submit_api.py", "worker.py", "requirements.txt")
DEFAULT_VENV = Path("/tmp/baseline-venv")
# What its requirements bring, as imported by its API (uvicorn[standard]: uvloop, httptools).
_IMPORTS = "fastapi, uvicorn, uvloop, httptools, redis, espeakng_loader, soundfile, numpy"
_INSTALL_TIMEOUT_S = 600


def located(explicit: str | None = None) -> Path | None:
    """The baseline's directory (`explicit`, else DEFAULT_DIR) if the baseline is there."""
    path = Path(explicit).resolve() if explicit else DEFAULT_DIR
    return path if all((path / n).exists() for n in _FILES) else None


def find_baseline(explicit: str | None = None) -> Path:
    """The baseline's directory: `explicit`, else DEFAULT_DIR; exits naming what is missing."""
    path = Path(explicit).resolve() if explicit else DEFAULT_DIR
    missing = [n for n in _FILES if not (path / n).exists()]
    if missing:
        raise SystemExit(
            f"no baseline at {path} (missing {', '.join(missing)}); pass --baseline-dir, "
            "or --skip-baseline to measure ours alone"
        )
    return path


def python(venv: Path) -> Path:
    return venv / "bin" / "python"


def venv_ready(venv: Path) -> bool:
    if not python(venv).exists():
        return False
    probe = subprocess.run(
        [str(python(venv)), "-c", f"import {_IMPORTS}"],
        capture_output=True,
        check=False,
    )
    return probe.returncode == 0


def ensure_venv(venv: Path, baseline_dir: Path) -> Path:
    """The baseline's virtualenv, created and installed from its requirements.txt if needed."""
    if venv_ready(venv):
        return venv
    base_python = shutil.which("python3") or sys.executable
    print(f"installing the baseline into {venv} (once) ...", flush=True)
    if not python(venv).exists():
        subprocess.run([base_python, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [
            str(python(venv)),
            "-m",
            "pip",
            "install",
            "-q",
            "-r",
            str(baseline_dir / "requirements.txt"),
        ],
        check=True,
        timeout=_INSTALL_TIMEOUT_S,
    )
    if not venv_ready(venv):
        raise SystemExit(f"the baseline virtualenv {venv} still misses one of: {_IMPORTS}")
    return venv


def api_command(venv: Path, baseline_dir: Path, port: int) -> list[str]:
    """Its API exactly as its README starts it (uvloop, httptools, no access log)."""
    return [
        str(python(venv)),
        "-m",
        "uvicorn",
        "--app-dir",
        str(baseline_dir),
        "submit_api:app",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--loop",
        "uvloop",
        "--http",
        "httptools",
        "--no-access-log",
    ]


def worker_command(venv: Path, baseline_dir: Path) -> list[str]:
    return [str(python(venv)), str(baseline_dir / "worker.py")]


def redis_url(ours: str) -> str:
    """Ours's Redis server, its own database: its keys (tts:queue, tts:result:*) never meet ours."""
    return ours.rsplit("/", 1)[0] + "/1"
