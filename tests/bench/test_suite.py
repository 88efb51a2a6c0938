"""The benchmark suite end to end against real processes: it measures, and it cannot silently
measure nothing (a request that errors fails the module, and a failed module fails the suite)."""

from __future__ import annotations

import asyncio
import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from bench import notice
from bench.lib.stats import BenchError
from core.infra.embedded_redis import free_port

ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.fixture
async def broken_server(aiohttp_server: Any) -> tuple[str, list[str]]:
    """A real HTTP server that answers every request with a 500; the requests it got."""
    seen: list[str] = []

    async def fail(request: web.Request) -> web.Response:
        seen.append(f"{request.method} {request.path}")
        return web.json_response({"error": "broken on purpose"}, status=500)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", fail)
    server = await aiohttp_server(app)
    return str(server.make_url("")).rstrip("/"), seen


async def _run(*args: str, timeout: float) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *args,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@pytest.mark.timeout(300)  # the first run installs the baseline's virtualenv
async def test_quick_suite_measures_both_systems_and_fails_on_a_failed_module(
    tmp_path: Path, broken_server: tuple[str, list[str]]
) -> None:
    """Measurements 2 and 3 run for real (embedded Redis, web, worker, the baseline); 4 is
    pointed at a server answering 500: the suite prints what ran, then exits 1."""
    url, seen = broken_server
    code, out, err = await _run(
        "-m",
        "bench.suite",
        "--quick",
        "--only",
        "2,3,4",
        "--ours-url",
        url,
        "--results",
        str(tmp_path),
        timeout=280,
    )
    assert code == 1, out + err
    assert seen, "the failing module never reached the server"
    report = json.loads((tmp_path / "suite.json").read_text())
    assert report["failures"] and "bench.endtoend" in report["failures"][0]
    assert "FAILED: bench.endtoend" in out and "answered 500" in err
    rows = report["rows"]
    sections = {r["section"] for r in rows}
    assert sections == {"2. completion notice", "3. pipeline overhead"}
    for row in rows:
        assert math.isfinite(row["ours"]) and row["ours"] > 0, row
        assert row["baseline"] is not None and row["baseline"] > 0, row
    notice_rows = [r for r in rows if r["section"] == "2. completion notice"]
    assert len(notice_rows) == 4
    # Polling every 500 ms leaves the baseline's clients in the dark longer than every 100 ms.
    assert notice_rows[3]["baseline"] > notice_rows[1]["baseline"]
    assert "| 2. completion notice |" in (tmp_path / "suite.md").read_text()
    assert "machine:" in out and "Redis" in out


async def test_a_module_fails_when_nothing_listens(tmp_path: Path) -> None:
    code, _, err = await _run(
        "-m",
        "bench.endtoend",
        "--quick",
        "--ours-url",
        f"http://127.0.0.1:{free_port()}",
        "--output",
        str(tmp_path / "out.json"),
        timeout=60,
    )
    assert code == 1 and "bench FAILED: endtoend" in err
    assert not (tmp_path / "out.json").exists()


async def test_notice_clients_raise_on_errored_requests(
    broken_server: tuple[str, list[str]],
) -> None:
    url, seen = broken_server
    with pytest.raises(BenchError, match="500"):
        await notice.ours_jobs(url, 1, 0, None)
    with pytest.raises(BenchError, match="500"):
        await notice.baseline_jobs(url, 0.01, 1, 0, None)
    assert "GET /v1/events" in seen and "POST /tts/submit" in seen


async def test_chattts_online_bench_runs_the_suite(tmp_path: Path) -> None:
    code, out, _ = await _run("-m", "cli", "bench", "--help", timeout=60)
    assert code == 0 and "python -m bench.suite" in out and "--only" in out
    code, _, err = await _run("-m", "cli", "bench", "--only", "99", timeout=60)
    assert code == 2 and "--only" in err
