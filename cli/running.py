"""Where `chattts-online run` says it is running: a file in the user's state directory, so that
`say`, `submit`, `admin` and `check` find its address, data and settings from any directory."""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_URL = "http://127.0.0.1:8000"
URL_ENV = "CHATTTS_URL"


def state_file() -> Path:
    """$XDG_STATE_HOME/chattts-online/running.json (~/.local/state by default)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "chattts-online" / "running.json"


@dataclass(frozen=True)
class Running:
    """A `run` that is up: its page's address, its data directory, its settings (masked)."""

    url: str
    data_dir: str
    pid: int
    settings: dict[str, Any]


def announce(url: str, data_dir: str, settings: dict[str, Any]) -> None:
    """Say that this process serves `url` (written whole, then renamed: never half a file)."""
    path = state_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"url": url, "data_dir": str(Path(data_dir).resolve()), "pid": os.getpid()}
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(json.dumps({**record, "settings": settings}, default=str))
    temporary.replace(path)


def withdraw() -> None:
    """Forget this process's announcement (another `run`'s stays)."""
    found = _read()
    if found is not None and found.pid == os.getpid():
        with contextlib.suppress(FileNotFoundError):
            state_file().unlink()


def running() -> Running | None:
    """The `run` that is up, if one announced itself and its process lives."""
    found = _read()
    if found is None:
        return None
    try:
        os.kill(found.pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:  # another user's process: alive
        pass
    return found


def _read() -> Running | None:
    try:
        raw = json.loads(state_file().read_text())
        return Running(str(raw["url"]), str(raw["data_dir"]), int(raw["pid"]), raw["settings"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def service_url(given: str | None = None) -> str:
    """--url, else CHATTTS_URL, else the running `run`'s address, else the default."""
    if given:
        return given
    if os.environ.get(URL_ENV):
        return os.environ[URL_ENV]
    found = running()
    return found.url.rstrip("/") if found is not None else DEFAULT_URL
