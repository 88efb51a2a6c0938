"""Which running service the command line talks to: the run started here or above, else the
only one up, never a guess between two; a dead run's record is forgotten."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cli import running


def _announce(state: Path, pid: int, port: int, started_in: Path) -> None:
    record = {
        "url": f"http://127.0.0.1:{port}/",
        "data_dir": str(started_in / "data"),
        "pid": pid,
        "settings": {},
        "started_in": str(started_in),
    }
    (state / f"{pid}.json").write_text(json.dumps(record))


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(running.URL_ENV, raising=False)
    folder = running.state_dir()
    folder.mkdir(parents=True)
    return folder


def test_the_run_started_here_or_above_wins(state: Path, tmp_path: Path) -> None:
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    for folder in (mine / "sub", theirs):
        folder.mkdir(parents=True)
    _announce(state, os.getpid(), 8101, mine)
    _announce(state, os.getppid(), 8102, theirs)
    found = running.running(mine / "sub")
    assert found is not None and found.url == "http://127.0.0.1:8101/"
    with pytest.raises(running.AmbiguousService, match="--url"):
        running.running(tmp_path)


def test_the_only_run_up_is_found_from_anywhere_and_said(
    state: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _announce(state, os.getpid(), 8103, tmp_path / "elsewhere")
    assert running.service_url(None, "say") == "http://127.0.0.1:8103"
    assert "http://127.0.0.1:8103 (run from" in capsys.readouterr().err
    assert running.service_url("http://given:1", "say") == "http://given:1"


def test_a_dead_runs_record_is_forgotten(state: Path, tmp_path: Path) -> None:
    dead = 2**22 + 12345  # above Linux's pid_max: no process has it
    _announce(state, dead, 8104, tmp_path)
    assert running.running(tmp_path) is None
    assert not (state / f"{dead}.json").exists()
    assert running.service_url() == running.DEFAULT_URL
