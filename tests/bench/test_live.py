"""bench/live.py: a listener's figures from what it received, and a quick run for real (simulated
LLMs through web, Redis and an eSpeak NG worker, the three ways side by side), guarded by figures
of the same run compared with margins that a shared 2-core machine's noise never reaches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.live_modes import BYTES_PER_S, Heard
from bench.live_text import answers
from tests.bench.helpers import run_quick

# A barge-in's bound here: ten times the target (a loaded 2-core machine), far under the
# seconds of audio an ignored `clear` would still send.
BARGE_IN_BOUND_MS = 1000.0


def test_a_listener_counts_from_the_first_sentence_and_plays_in_order() -> None:
    heard = Heard(start=0.0, first_sentence=0.5, last_token=2.0)
    heard.arrivals = [(0.6, BYTES_PER_S), (1.2, BYTES_PER_S), (3.0, BYTES_PER_S // 2)]
    figures = heard.figures()
    assert figures["first_audio_ms"] == pytest.approx(100)
    assert figures["audio_s"] == pytest.approx(2.5)
    assert figures["underrun_ms"] == pytest.approx(400)  # 2 s in hand by 2.6, the next at 3.0
    assert figures["last_audio_ms"] == pytest.approx(1000)
    assert figures["played_end_ms"] == pytest.approx(1500)  # 0.6 + 2.5 + 0.4 - 2.0


def test_answers_are_distinct_sentences_written_at_their_own_rates() -> None:
    said = answers(7, 8)
    assert len({a.text for a in said}) == 8
    for a in said:
        assert 3 <= len(a.sentences) <= 5 and 30 <= a.rate <= 100
        assert a.text == " ".join(a.sentences)
        assert 0 < a.sentence_end(0) < a.last
    assert [a.text for a in answers(7, 8)] == [a.text for a in said]  # seeded


@pytest.mark.timeout(300)
def test_quick_live_run(tmp_path: Path) -> None:
    out = tmp_path / "live.json"
    done = run_quick("bench.live", out)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(out.read_text())
    rounds = report["engines"]["espeak"]["rounds"]
    assert [r["sessions"] for r in rounds] == [1, 2]
    for r in rounds:
        first = {mode: r[mode]["first_audio_ms"]["p50"] for mode in ("live", "whole")}
        # `whole` waits for the last token (a second or more after the first sentence); live
        # speaks the first sentence at once.
        assert first["live"] < first["whole"] / 2, f"N={r['sessions']}: first audio p50 {first}"
        barge = r["barge-in"]
        assert barge["barge_in_ms"]["p95"] < BARGE_IN_BOUND_MS, barge["barge_in_ms"]
        assert barge["stale_frames_total"] == 0, "audio of the old text after `cleared`"
        for mode in ("whole", "per-sentence", "live"):
            assert r[mode]["audio_s"]["p50"] > 5, f"{mode}: an answer is several seconds"
    assert {row["section"] for row in report["rows"]} == {"9. live sessions"}
    assert "live sessions, espeak" in done.stdout
