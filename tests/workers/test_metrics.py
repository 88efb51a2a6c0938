"""A worker's own Prometheus /metrics: served on its port, moved by real jobs through the queue."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from redis.asyncio import Redis

from core.infra.embedded_redis import EmbeddedRedis, free_port
from core.infra.settings import Settings
from core.queue.job import Job, SynthesisRequest
from core.queue.store import Queue
from tests.conftest import WorkerProcess
from tests.support.jobs import LONG_TEXT, wait_running, wait_terminal
from tests.support.metrics import Samples, scrape, value

FAMILIES = {
    "chattts_worker_jobs": "counter",
    "chattts_worker_queue_wait_seconds": "histogram",
    "chattts_worker_synthesis_seconds": "histogram",
    "chattts_worker_real_time_factor": "histogram",
    "chattts_worker_time_to_first_segment_seconds": "histogram",
    "chattts_worker_batch_segments": "histogram",
    "chattts_worker_batch_jobs": "histogram",
    "chattts_worker_cache_hits": "counter",
    "chattts_worker_cache_misses": "counter",
    "chattts_worker_redis_errors": "counter",
    "chattts_worker_lease_renewal_failures": "counter",
    "chattts_worker_stale_completions_refused": "counter",
    "chattts_worker_audio_seconds": "counter",
    "chattts_worker_jobs_in_hand": "gauge",
    "chattts_worker_ready": "gauge",
    "chattts_worker_engine_load_seconds": "gauge",
    "chattts_worker_info": "gauge",
}
OUTCOMES = {"succeeded", "cache_hit", "failed", "cancelled", "dead", "released", "yielded", "lost"}
# Clock slack between the moments the hash records and the ones the worker measures.
SLACK_S = 0.05
# How long the worker is frozen (SIGSTOP) while jobs are submitted; below the heartbeat key's TTL.
FROZEN_S = 0.5


def delta(after: Samples, before: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


async def heartbeat(aredis: Redis, worker: WorkerProcess) -> dict[str, Any]:
    raw = await aredis.get(worker.keys.worker(worker.name))
    assert raw is not None
    beat: dict[str, Any] = orjson.loads(raw)
    return beat


def listening_ports(pid: int) -> set[int]:
    """TCP ports process `pid` listens on (from /proc: its socket inodes in LISTEN state)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = fd.readlink().name
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            cols = line.split()
            if cols[3] == "0A" and cols[9] in inodes:  # 0A: LISTEN
                ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


async def test_every_metric_is_served_and_moves_with_real_jobs(
    settings: Settings, aredis: Redis, start_worker: Callable[..., WorkerProcess]
) -> None:
    port = free_port()
    worker = start_worker(CHATTTS_WORKER_METRICS_PORT=str(port))
    beat = await heartbeat(aredis, worker)
    assert beat["metrics_port"] == port
    assert beat["host"] == socket.gethostname()
    assert listening_ports(worker.process.pid) == {port}
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/healthz") as health,
    ):
        assert health.status == 200 and await health.json() == {"status": "ok"}

    families, before = await scrape(port)
    assert {name: families.get(name) for name in FAMILIES} == FAMILIES
    assert {
        dict(labels)["outcome"] for name, labels in before if name == "chattts_worker_jobs_total"
    } == OUTCOMES
    assert value(before, "chattts_worker_ready") == 1
    assert value(before, "chattts_worker_jobs_in_hand") == 0
    assert abs(value(before, "chattts_worker_engine_load_seconds") - beat["ready_s"]) < 1e-6
    info = {
        dict(labels)["name"]: dict(labels)
        for name, labels in before
        if name == "chattts_worker_info"
    }
    assert info[worker.name]["engine"] == "espeak"
    assert info[worker.name]["model_version"] == beat["model_version"]

    queue = Queue(aredis, settings)
    texts = ["First metrics job.", "Second metrics job.", "Third metrics job.", LONG_TEXT[:400]]
    # The jobs wait a known time in the queue: the worker is frozen while they are submitted.
    os.kill(worker.process.pid, signal.SIGSTOP)
    try:
        synthesized = [
            (await queue.enqueue(SynthesisRequest(text=t, voice="en_male"), "c1")).job_id
            for t in texts
        ]
        await asyncio.sleep(FROZEN_S)
    finally:
        os.kill(worker.process.pid, signal.SIGCONT)
    for job_id in synthesized:
        await wait_terminal(queue, job_id)
    # The same client again: the result cache answers a client with its own results.
    repeat = await queue.enqueue(SynthesisRequest(text=texts[0], voice="en_male"), "c1")
    await wait_terminal(queue, repeat.job_id)
    ghost = await queue.enqueue(SynthesisRequest(text="Who speaks?", voice="ghost"), "c3")
    assert (await wait_terminal(queue, ghost.job_id))[-1]["type"] == "failed"
    jobs: list[Job] = []
    for job_id in [*synthesized, repeat.job_id]:
        job = await queue.get(job_id)
        assert job is not None and job.state == "succeeded"
        jobs.append(job)
    assert [j.cached for j in jobs] == [False] * 4 + [True]
    assert jobs[3].segments_total >= 3  # the long one streamed several segments

    deadline = time.monotonic() + 10
    # The heartbeat's counts and the metrics come from the same calls: they agree.
    while (beat := await heartbeat(aredis, worker))["jobs_succeeded"] < 4 or not beat[
        "jobs_failed"
    ]:
        assert time.monotonic() < deadline, beat
        await asyncio.sleep(0.05)
    _, after = await scrape(port)

    def moved(name: str, **labels: str) -> float:
        return delta(after, before, name, **labels)

    assert moved("chattts_worker_jobs_total", outcome="succeeded") == 4
    assert moved("chattts_worker_jobs_total", outcome="cache_hit") == 1
    assert moved("chattts_worker_jobs_total", outcome="failed") == 1 == beat["jobs_failed"]
    assert beat["jobs_succeeded"] == 4 and beat["jobs_fenced"] == 0
    for outcome in OUTCOMES - {"succeeded", "cache_hit", "failed"}:
        assert moved("chattts_worker_jobs_total", outcome=outcome) == 0, outcome
    assert moved("chattts_worker_cache_hits_total") == 1
    assert moved("chattts_worker_cache_misses_total") == 4

    # Queue wait: every started job (the cache hit and the failed one too), submit to start.
    assert moved("chattts_worker_queue_wait_seconds_count") == 6
    failed = await queue.get(ghost.job_id)
    assert failed is not None
    jobs.append(failed)
    waited = sum((j.started_at or 0) - j.created_at for j in jobs)
    assert waited > 4 * FROZEN_S
    queue_wait = moved("chattts_worker_queue_wait_seconds_sum")
    assert waited - 6 * SLACK_S <= queue_wait <= waited + 6 * SLACK_S

    # Synthesis time and real-time factor: one observation per synthesized job; together the
    # jobs' shares are the engine's busy time.
    assert moved("chattts_worker_synthesis_seconds_count") == 4
    assert abs(moved("chattts_worker_synthesis_seconds_sum") - beat["busy_s"]) < 0.01
    assert moved("chattts_worker_real_time_factor_count") == 4
    assert 0 < moved("chattts_worker_real_time_factor_sum") < 4 * 5
    audio_s = sum(j.duration_s or 0 for j in jobs[:4])
    assert abs(moved("chattts_worker_audio_seconds_total") - audio_s) < 0.01
    assert abs(moved("chattts_worker_audio_seconds_total") - beat["audio_seconds"]) < 0.01

    # First segment: once per synthesized job, after its start and no later than its end.
    assert moved("chattts_worker_time_to_first_segment_seconds_count") == 4
    first = moved("chattts_worker_time_to_first_segment_seconds_sum")
    to_start = sum((j.started_at or 0) - j.created_at for j in jobs[:4])
    to_end = sum((j.finished_at or 0) - j.created_at for j in jobs[:4])
    assert to_start > 4 * FROZEN_S
    assert to_start - 4 * SLACK_S <= first <= to_end + 4 * SLACK_S

    # Batches: one observation per busy period (the engine never idle between its segments).
    assert moved("chattts_worker_batch_segments_count") == beat["batches"]
    assert moved("chattts_worker_batch_segments_sum") == beat["segments"]
    # (and each segment made again after its first attempt failed its check: workers/checks/)
    remade = sum((j.checks or {}).get("remade", 0) for j in jobs[:4])
    assert beat["segments"] == sum(max(1, j.segments_total) for j in jobs[:4]) + remade
    assert moved("chattts_worker_batch_jobs_count") == beat["batches"]
    assert beat["batches"] <= moved("chattts_worker_batch_jobs_sum") <= beat["segments"]

    for name in (
        "chattts_worker_redis_errors_total",
        "chattts_worker_lease_renewal_failures_total",
        "chattts_worker_stale_completions_refused_total",
    ):
        assert value(after, name) == 0, name
    assert value(after, "chattts_worker_jobs_in_hand") == 0

    assert await asyncio.to_thread(worker.stop) == 0
    with socket.socket() as probe:  # the worker let go of its port
        probe.bind(("0.0.0.0", port))


async def test_port_zero_serves_nothing(
    settings: Settings, aredis: Redis, start_worker: Callable[..., WorkerProcess]
) -> None:
    worker = start_worker(CHATTTS_WORKER_METRICS_PORT="0")
    beat = await heartbeat(aredis, worker)
    assert beat["metrics_port"] is None
    assert listening_ports(worker.process.pid) == set()


async def test_taken_port_warns_and_the_worker_still_works(
    settings: Settings, aredis: Redis, start_worker: Callable[..., WorkerProcess]
) -> None:
    with socket.socket() as squatter:
        squatter.bind(("0.0.0.0", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        worker = start_worker(CHATTTS_WORKER_METRICS_PORT=str(port))
        assert (await heartbeat(aredis, worker))["metrics_port"] is None
        assert listening_ports(worker.process.pid) == set()
        queue = Queue(aredis, settings)
        submitted = await queue.enqueue(SynthesisRequest(text="Still here.", voice="en_male"), "c")
        events = await wait_terminal(queue, submitted.job_id)
        assert events[-1]["type"] == "succeeded"
    warning = next(line for line in worker.log().splitlines() if "WORKER_METRICS_PORT" in line)
    assert "WARNING" in warning and str(port) in warning


async def test_redis_outage_counts_errors_and_failed_renewals(
    settings: Settings, tmp_path: Path, start_worker: Callable[..., WorkerProcess]
) -> None:
    server = EmbeddedRedis(tmp_path / "redis", appendonly=True).start()
    client = Redis.from_url(server.url)
    try:
        settings = settings.replace(redis_url=server.url)
        port = free_port()
        start_worker(CHATTTS_REDIS_URL=server.url, CHATTTS_WORKER_METRICS_PORT=str(port))
        _, before = await scrape(port)
        assert value(before, "chattts_worker_redis_errors_total") == 0
        queue = Queue(client, settings)
        submitted = await queue.enqueue(SynthesisRequest(text=LONG_TEXT, voice="en_male"), "c")
        await wait_running(queue, submitted.job_id)
        server.stop()
        await asyncio.sleep(1.5)  # several heartbeats and lease renewals (every 0.5 s) fail
        _, during = await scrape(port)  # /metrics answers without Redis
        server.start()
        await client.aclose()
        client = Redis.from_url(server.url)
        events = await wait_terminal(Queue(client, settings), submitted.job_id, timeout=60)
        assert events[-1]["type"] == "succeeded"
        assert value(during, "chattts_worker_lease_renewal_failures_total") >= 1
        assert value(during, "chattts_worker_redis_errors_total") >= 2
        assert value(during, "chattts_worker_jobs_in_hand") == 1
    finally:
        await client.aclose()
        server.stop()
