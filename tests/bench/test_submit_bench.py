"""bench.submit end to end in its quick mode: real Redis, a real web process, a real load
generator; figures come out as rows, and a refused request fails the bench instead of counting."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from bench.lib import loadgen
from bench.lib.report import Row
from tests.bench.helpers import run_quick


def _bench(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path / "submit.json"
    return run_quick("bench.submit", out, *args), out


def _rows(out: Path) -> dict[str, Row]:
    data = json.loads(out.read_text())
    assert data["raw"]["median"]
    return {row["metric"]: Row.from_json(row) for row in data["rows"]}


@pytest.mark.parametrize(
    "tool",
    [
        pytest.param("wrk", marks=pytest.mark.skipif(loadgen.wrk_path() is None, reason="no wrk")),
        "aiohttp",
    ],
)
def test_quick_run_reports_both_of_our_endpoints(tmp_path: Path, tool: str) -> None:
    done, out = _bench(tmp_path, "--skip-baseline", "--tool", tool, "--duration", "1.5")
    assert done.returncode == 0, done.stdout + done.stderr
    rows = _rows(out)
    for endpoint in ("POST /v1/tts/jobs", "POST /tts/submit"):
        rps = rows[f"requests/s (2xx), 16 connections, {endpoint}"]
        p50 = rows[f"p50 latency, 16 connections, {endpoint}"]
        p99 = rows[f"p99 latency, 16 connections, {endpoint}"]
        assert rps.section == "1. submit throughput" and rps.unit == "req/s"
        assert rps.ours > 0
        assert 0 < p50.ours <= p99.ours
        assert rps.baseline is None and rps.met is None  # no baseline: nothing judged
    assert json.loads(out.read_text())["raw"]["tool"] == tool
    assert "requests/s (2xx)" in done.stdout  # the table is printed too


def test_refused_submits_fail_the_bench(tmp_path: Path) -> None:
    # A backlog of one job: every submit after the first is answered 429.
    done, out = _bench(tmp_path, "--skip-baseline", "--setting", "max_backlog=1")
    assert done.returncode != 0
    assert "bench FAILED" in done.stderr and "status" in done.stderr
    assert not out.exists()


def test_refused_submits_fail_the_asyncio_load_generator_too(tmp_path: Path) -> None:
    done, out = _bench(
        tmp_path, "--skip-baseline", "--tool", "aiohttp", "--setting", "max_backlog=1"
    )
    assert done.returncode != 0
    assert "bench FAILED" in done.stderr and "HTTP 429" in done.stderr
    assert not out.exists()


# A guard, from the same run: the better of our two endpoints' requests per second against the
# baseline's (0.7-1.1x in quick runs here, 0.5x or below when a submit cost twice as much).
SUBMIT_AGAINST_BASELINE = 0.55


@pytest.mark.timeout(300)  # the first run installs the baseline's virtualenv
# One more 2 s run when the guard fails: a single one read 0.53x once in a full suite's run on
# this shared machine, where 0.7-1.1x is usual; a submit that really cost twice fails both.
@pytest.mark.flaky(reruns=1, only_rerun=["under the"])
def test_quick_run_against_the_baseline_judges_the_targets(tmp_path: Path) -> None:
    done, out = _bench(tmp_path, "--duration", "2", "--warmup", "0.5")
    assert done.returncode == 0, done.stdout + done.stderr
    rows = _rows(out)
    rps = rows["requests/s (2xx), 16 connections, POST /v1/tts/jobs"]
    p99 = rows["p99 latency, 16 connections, POST /tts/submit"]
    assert rps.baseline is not None and rps.baseline > 0
    assert rps.met is (rps.ours >= rps.baseline)
    assert p99.baseline is not None
    assert p99.met is (p99.ours <= p99.baseline)
    assert "non-2xx answers, 16 connections, POST /tts/submit" in rows
    best = max((r for m, r in rows.items() if m.startswith("requests/s")), key=lambda r: r.ours)
    assert best.baseline
    assert best.ours >= SUBMIT_AGAINST_BASELINE * best.baseline, (
        f"{best.metric}: ours {best.ours:.0f} req/s, the baseline's {best.baseline:.0f}: "
        f"{best.ours / best.baseline:.2f}x, under the {SUBMIT_AGAINST_BASELINE}x guard"
    )
