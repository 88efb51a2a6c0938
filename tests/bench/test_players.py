"""bench/players.py: the 1x player's underrun arithmetic, and a quick run for real (simulated
listeners on a real ChatTTS worker, with admission by capacity and without)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.lib.playback import underrun
from tests.bench.helpers import run_quick
from tests.workers.engines.chattts.conftest import requires_chattts


def test_a_player_stalls_only_when_its_buffer_runs_dry() -> None:
    assert underrun([]) == 0.0
    assert underrun([(0.0, 1.0), (0.5, 1.0), (1.4, 1.0)]) == 0.0  # always ahead
    # 0.2 s in hand, the next piece 0.5 s later: 0.3 s of silence, then it plays on.
    assert underrun([(0.0, 0.2), (0.5, 1.0)]) == pytest.approx(0.3)
    # Two stalls: 0.1 s; then the second piece plays out by 1.6 s: another 0.4 s.
    stalls = underrun([(0.0, 0.5), (0.6, 1.0), (2.0, 0.5)])
    assert stalls == pytest.approx(0.1 + 0.4)


@requires_chattts
@pytest.mark.chattts
@pytest.mark.timeout(400)
def test_quick_players_run(tmp_path: Path) -> None:
    out = tmp_path / "players.json"
    done = run_quick("bench.players", out)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(out.read_text())
    capacity = report["capacity_streams"]
    assert capacity >= 1
    for mode in ("capacity", "off"):  # both in one run
        counts = [row["streams"] for row in report[mode]]
        assert counts[0] == 1 and counts[-1] == 2 * capacity
        for row in report[mode]:
            assert 0 <= row["gap_free"] <= row["streams"]
            assert 0 < row["first_audio_p50_s"] <= row["first_audio_max_s"]
            assert row["audio_s_per_s"] > 0
    assert report["mixed"]["alone_p50_ms"] > 0 and report["mixed"]["ratio"] > 0
    rows = report["rows"]
    assert {row["section"] for row in rows} == {"8. streams"}
    assert len(rows) == len(report["capacity"]) + 2  # and the audio per second, and the mixed
    assert any(row["metric"].startswith("audio per second") for row in rows)
