"""bench.sse_capacity end to end in its quick mode: a real web process holding real SSE streams
from client processes; every stream must get every event, and a refused stream fails the bench."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from bench.lib.report import Row
from tests.bench.helpers import run_quick


def _bench(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path / "sse.json"
    return run_quick("bench.sse_capacity", out, *args), out


def test_quick_run_reports_streams_memory_and_fan_out(tmp_path: Path) -> None:
    done, out = _bench(tmp_path, "--connections", "150", "--events", "2", "--share", "3")
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(out.read_text())
    rows = {row["metric"]: Row.from_json(row) for row in data["rows"]}
    assert {row.section for row in rows.values()} == {"5. SSE capacity"}
    held = rows["SSE streams held by one web process"]
    assert held.ours == 150 and held.met is False  # the target is 5,000
    per_stream = rows["RSS per SSE stream (150 streams)"]
    assert per_stream.ours > 0 and per_stream.met is (per_stream.ours < 50)
    assert rows["events/s fanned out to 150 streams"].ours > 0
    assert rows["web CPU per event delivered"].ours > 0
    raw = data["raw"]
    assert raw["delivered"] == 150 * 2  # every stream got every event, exactly once
    assert raw["jobs_published"] == 50 * 2  # three tabs per client: one job reaches three


def test_refused_streams_fail_the_bench(tmp_path: Path) -> None:
    # API keys required: every /v1/events request is answered 401.
    done, out = _bench(tmp_path, "--connections", "20", "--setting", "api_keys=secret")
    assert done.returncode != 0
    assert "bench FAILED" in done.stderr and "HTTP 401" in done.stderr
    assert not out.exists()
