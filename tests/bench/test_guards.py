"""Guards against the next regression of a figure: each compares two figures measured side by
side in one run, with a margin that a shared 2-core machine's noise never reaches and a 2x
regression always does, and names both when it fails. They are not timings of their own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.table import Row
from tests.bench.helpers import ROOT, run_quick
from tests.workers.engines.chattts.conftest import requires_chattts

# Four streams at once through the whole service make about 3x the audio per second of one
# (1.5x when streams were taken one at a time on a device below real time).
STREAMS_BATCHED = 2.0
# Our submit's requests per second against the baseline's: 0.7-1.1x in quick runs here.
SUBMIT_AGAINST_BASELINE = 0.55


@requires_chattts
@pytest.mark.chattts
@pytest.mark.timeout(300)
def test_streams_are_batched_on_a_device_below_real_time(tmp_path: Path) -> None:
    """Four streamed OpenAI requests at once against one at a time, through web, Redis and a
    worker with the default admission, on a device below real time (the tiny model with a
    headroom no device meets): the batch makes several times the audio per second."""
    out = tmp_path / "streams.json"
    done = subprocess.run(
        [
            *(sys.executable, "-m", "bench.streams", "--size", "tiny", "--streams", "1,4"),
            *("--tokens", "96", "--repeats", "1", "--runtimes", "ours"),
            *("--admissions", "capacity", "--headroom", "1000", "--no-png"),
            *("--json", str(out)),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = {row["streams"]: row for row in json.loads(out.read_text())["rows"]}
    alone, batched = rows[1]["audio_s_per_s"], rows[4]["audio_s_per_s"]
    assert batched >= STREAMS_BATCHED * alone, (
        f"4 streams at once made {batched:.2f} audio-s/s, one alone {alone:.2f}: "
        f"{batched / alone:.2f}x, under the {STREAMS_BATCHED}x guard"
    )


@pytest.mark.timeout(300)  # the first run installs the baseline's virtualenv
def test_a_submit_costs_about_what_the_baselines_does(tmp_path: Path) -> None:
    out = tmp_path / "submit.json"
    done = run_quick("bench.submit", out, "--duration", "2", "--warmup", "0.5")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [Row.from_json(r) for r in json.loads(out.read_text())["rows"]]
    rates = {r.metric: r for r in rows if r.metric.startswith("requests/s")}
    best = max(rates.values(), key=lambda r: r.ours)
    assert best.baseline, rates
    assert best.ours >= SUBMIT_AGAINST_BASELINE * best.baseline, (
        f"{best.metric}: ours {best.ours:.0f} req/s, the baseline's {best.baseline:.0f}: "
        f"{best.ours / best.baseline:.2f}x, under the {SUBMIT_AGAINST_BASELINE}x guard"
    )
