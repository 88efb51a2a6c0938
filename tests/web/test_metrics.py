"""The web tier's /metrics: queue-wide gauges and counters move as jobs wait, run and finish."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from prometheus_client.parser import text_string_to_metric_families

from core.infra.settings import Settings
from core.queue.keys import Keys
from core.queue.store import Queue
from tests.conftest import ClientFactory, WorkerProcess
from tests.web.conftest import collect_sse, submit, wait_job

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]

WEB_METRICS = {
    "chattts_http_requests_total",
    "chattts_http_request_duration_seconds_bucket",
    "chattts_sse_connections",
    "chattts_websocket_connections",
    "chattts_jobs_submitted_total",
    "chattts_queue_backlog_jobs",
    "chattts_queue_lag_entries",
    "chattts_queue_pending_entries",
    "chattts_queue_oldest_pending_age_seconds",
    "chattts_queue_oldest_waiting_age_seconds",
    "chattts_dead_letter_entries",
    "chattts_jobs_total",
    "chattts_queue_submitted_jobs_total",
    "chattts_queue_reclaimed_jobs_total",
    "chattts_queue_stale_completions_refused_total",
    "chattts_queue_audio_seconds_total",
    "chattts_workers_alive",
    "chattts_cache_hits_total",
    "chattts_cache_misses_total",
    "chattts_cache_hit_ratio",
    "chattts_backlog_alert",
    "chattts_backlog_alert_threshold_jobs",
    "chattts_events_sent_total",
    "chattts_events_replayed_total",
    "chattts_redis_errors_total",
}


async def scrape(client: TestClient[Any, Any]) -> Samples:
    response = await client.get("/metrics")
    assert response.status == 200
    samples: Samples = {}
    for family in text_string_to_metric_families(await response.text()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def names(samples: Samples) -> set[str]:
    return {name for name, _ in samples}


async def wait_for(predicate: Callable[[], Any], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not await predicate():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.1)


async def test_every_metric_is_exposed_before_any_job(client: TestClient[Any, Any]) -> None:
    await client.get("/healthz")
    missing = WEB_METRICS - names(await scrape(client))
    assert not missing, f"not exposed: {sorted(missing)}"


async def test_queue_metrics_follow_jobs_from_waiting_to_done(
    client: TestClient[Any, Any], start_worker: Callable[..., WorkerProcess], keys: Keys
) -> None:
    jobs = [await submit(client, text=f"metrics job {i}") for i in range(3)]
    await asyncio.sleep(0.3)
    waiting = await scrape(client)
    assert value(waiting, "chattts_queue_backlog_jobs") == 3
    # They wait in the fair scheduler's room, one client's, not in a stream.
    assert value(waiting, "chattts_queue_waiting_jobs", lane="interactive") == 3
    assert value(waiting, "chattts_queue_waiting_clients", lane="interactive") == 1
    assert value(waiting, "chattts_queue_waiting_jobs", lane="bulk") == 0
    assert value(waiting, "chattts_queue_waiting_oldest_age_seconds", lane="interactive") >= 0.2
    assert value(waiting, "chattts_queue_lag_entries", stream="jobs") == 0
    assert value(waiting, "chattts_queue_pending_entries", stream="jobs") == 0
    assert value(waiting, "chattts_workers_alive") == 0
    assert value(waiting, "chattts_queue_submitted_jobs_total") == 3

    start_worker()
    for job in jobs:
        await wait_job(client, job["id"], ("succeeded",))
    done = await scrape(client)
    assert value(done, "chattts_queue_backlog_jobs") == 0
    assert value(done, "chattts_queue_waiting_jobs", lane="interactive") == 0
    assert value(done, "chattts_queue_waiting_oldest_age_seconds", lane="interactive") == 0
    assert value(done, "chattts_queue_lag_entries", stream="jobs") == 0
    assert value(done, "chattts_queue_oldest_waiting_age_seconds", stream="jobs") == 0
    assert value(done, "chattts_jobs_total", outcome="succeeded") == 3
    assert value(done, "chattts_jobs_total", outcome="failed") == 0
    assert value(done, "chattts_workers_alive") == 1
    assert value(done, "chattts_queue_audio_seconds_total") > 0
    assert value(done, "chattts_dead_letter_entries") == 0


async def test_pending_age_and_dead_letters(
    client: TestClient[Any, Any], aredis: Any, keys: Keys, settings: Settings
) -> None:
    """A job taken by a consumer that never finishes it is pending and ages; the DLQ is counted."""
    job = await submit(client, text="read and never finished")
    queue = Queue(aredis, settings)
    await queue.ensure_group()
    assert [taken[2] for taken in await queue.work.take("stuck", 1)] == [job["id"]]
    await aredis.xadd(keys.dlq, {"job_id": job["id"], "reason": "test"})
    await asyncio.sleep(0.3)
    samples = await scrape(client)
    assert value(samples, "chattts_queue_pending_entries", stream="jobs") == 1
    assert value(samples, "chattts_queue_lag_entries", stream="jobs") == 0
    assert value(samples, "chattts_queue_oldest_pending_age_seconds", stream="jobs") >= 0.2
    assert value(samples, "chattts_dead_letter_entries") == 1


async def test_events_sent_and_replayed_count_by_transport(
    client: TestClient[Any, Any], worker: WorkerProcess
) -> None:
    job = await submit(client, text="events counted")
    live = await collect_sse(await client.get(f"/v1/tts/jobs/{job['id']}/events"))
    before = await scrape(client)
    sent = value(before, "chattts_events_sent_total", transport="sse")
    assert sent >= len(live) >= 3
    # Reading the finished job's events again from the start: every one is a replay.
    again = await collect_sse(await client.get(f"/v1/tts/jobs/{job['id']}/events"))
    after = await scrape(client)
    assert value(after, "chattts_events_sent_total", transport="sse") == sent + len(again)
    replayed = value(after, "chattts_events_replayed_total", transport="sse")
    assert replayed - value(before, "chattts_events_replayed_total", transport="sse") == len(again)

    async with client.ws_connect("/v1/ws") as ws:
        await ws.send_json({"op": "subscribe", "job_id": job["id"]})
        frames = []
        while len(frames) < len(again):
            frame = await ws.receive_json(timeout=10)
            if frame.get("type") == "event":
                frames.append(frame)
    ws_samples = await scrape(client)
    assert value(ws_samples, "chattts_events_sent_total", transport="ws") == len(frames)
    assert value(ws_samples, "chattts_events_replayed_total", transport="ws") == len(frames)


async def test_backlog_alert_logs_sets_the_metric_and_readiness_detail(
    make_client: ClientFactory, caplog: pytest.LogCaptureFixture
) -> None:
    client = await make_client(backlog_alert=2)
    caplog.set_level(logging.WARNING, logger="chattts_online.web.backlog")
    for i in range(2):
        await submit(client, text=f"below the line {i}")
    await asyncio.sleep(1.5)  # a sample or two: at the threshold is not above it
    assert value(await scrape(client), "chattts_backlog_alert") == 0
    await submit(client, text="one too many")

    async def alerted() -> bool:
        return value(await scrape(client), "chattts_backlog_alert") == 1

    await wait_for(alerted)
    samples = await scrape(client)
    assert value(samples, "chattts_backlog_alert_threshold_jobs") == 2
    ready = await (await client.get("/readyz")).json()
    assert ready["backlog"] == {"alert": True, "waiting": 3, "threshold": 2}
    warnings = [r for r in caplog.records if "backlog alert" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
    assert "3 jobs waiting" in warnings[0].getMessage()


async def test_redis_errors_are_counted(make_client: ClientFactory) -> None:
    client = await make_client(redis_url="redis://127.0.0.1:1/0")
    response = await client.post("/v1/tts/jobs", json={"text": "nowhere to go"})
    assert response.status == 503
    samples = await scrape(client)
    assert value(samples, "chattts_redis_errors_total") >= 1
