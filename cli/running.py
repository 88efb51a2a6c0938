"""Where each `chattts-online run` says it is running: a file per run in the user's state
directory, so that `say`, `submit`, `admin` and `check` find its address, data and settings: the
run started in this directory (or one above it), else the only one up; never a guess between
two."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cli.errors import USAGE, CliError

DEFAULT_URL = "http://127.0.0.1:8000"
URL_ENV = "CHATTTS_URL"


def state_dir() -> Path:
    """$XDG_STATE_HOME/chattts-online/runs (~/.local/state by default): a file per run."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "chattts-online" / "runs"


def state_file(pid: int | None = None) -> Path:
    return state_dir() / f"{os.getpid() if pid is None else pid}.json"


class AmbiguousService(CliError):
    """Several runs are up and none was started here: which one is meant cannot be told."""

    def __init__(self, message: str) -> None:
        super().__init__(message, USAGE)


@dataclass(frozen=True)
class Running:
    """A `run` that is up: its page's address, its data directory, its settings (masked), and
    the directory it was started in."""

    url: str
    data_dir: str
    pid: int
    settings: dict[str, Any]
    started_in: str


def announce(url: str, data_dir: str, settings: dict[str, Any]) -> None:
    """Say that this process serves `url` (written whole, then renamed: never half a file)."""
    path = state_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "url": url,
        "data_dir": str(Path(data_dir).resolve()),
        "pid": os.getpid(),
        "started_in": str(Path.cwd()),
    }
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(json.dumps({**record, "settings": settings}, default=str))
    temporary.replace(path)


def withdraw() -> None:
    """Forget this process's announcement (another `run`'s stays)."""
    with contextlib.suppress(FileNotFoundError):
        state_file().unlink()


def running(here: Path | None = None) -> Running | None:
    """The `run` meant from `here` (this directory): the one started in it or the nearest
    directory above it, else the only one up; AmbiguousService when several are up and none of
    them was started here."""
    here = (here or Path.cwd()).resolve()
    runs = _live_runs()
    above = [run for run in runs if here.is_relative_to(run.started_in)]
    if above:
        return max(above, key=lambda run: len(run.started_in))
    if len(runs) > 1:
        listed = ", ".join(f"{run.url} (run from {run.started_in})" for run in runs)
        raise AmbiguousService(
            f"several services are running and none was started in this directory: {listed}; "
            "say which with --url or CHATTTS_URL"
        )
    return runs[0] if runs else None


def _live_runs() -> list[Running]:
    """The runs that announced themselves and whose process lives (the others' files go)."""
    runs = []
    for path in sorted(state_dir().glob("*.json")):
        found = _read(path)
        if found is not None and _alive(found.pid):
            runs.append(found)
        elif found is not None:
            with contextlib.suppress(OSError):
                path.unlink()
    return runs


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        pass
    return True


def _read(path: Path) -> Running | None:
    try:
        raw = json.loads(path.read_text())
        return Running(
            str(raw["url"]),
            str(raw["data_dir"]),
            int(raw["pid"]),
            raw["settings"],
            str(raw["started_in"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def service_url(given: str | None = None, command: str = "") -> str:
    """--url, else CHATTTS_URL, else the running `run`'s address (said on standard error, with
    where it was started), else the default."""
    if given:
        return given
    if os.environ.get(URL_ENV):
        return os.environ[URL_ENV]
    found = running()
    if found is None:
        return DEFAULT_URL
    url = found.url.rstrip("/")
    print(f"chattts-online {command}: {url} (run from {found.started_in})", file=sys.stderr)
    return url
