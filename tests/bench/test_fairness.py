"""bench/fairness.py runs for real (quick): interactive clients beside a client's documents, each
completion read from the client's own event stream."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bench.helpers import run_quick


@pytest.mark.timeout(300)
def test_quick_fairness_run(tmp_path: Path) -> None:
    out = tmp_path / "fairness.json"
    done = run_quick("bench.fairness", out)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert set(report) == {"fifo", "fair", "rows"}  # both orders in one run
    for order in ("fifo", "fair"):
        figures = report[order]["workers_1"]
        assert figures["interactive_jobs"] >= 2 * 3 * 3  # three clients, both phases, 1 job/s
        assert 0 < figures["alone_p50_ms"] <= figures["alone_p99_ms"]
        assert 0 < figures["flood_p50_ms"] <= figures["flood_p99_ms"]
        assert figures["bulk_alone_s"] > 0 and figures["bulk_beside_interactive_s"] > 0
    # Section 7 of the suite's table: the fair order as ours, first come first served beside it.
    rows = report["rows"]
    assert {row["section"] for row in rows} == {"7. fair share"} and len(rows) == 3
    assert all(row["baseline"] is not None and row["ours"] > 0 for row in rows)
