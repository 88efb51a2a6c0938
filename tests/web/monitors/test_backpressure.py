"""Backpressure over HTTP: 429s with a Retry-After measured from throughput, idempotent retries.

The Retry-After estimate reads the completion counters that every worker's Lua scripts bump in
the queue's stats hash; here a task bumps them at a known pace while no worker drains the queue,
so the expected answer is backlog / pace.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from core.queue.keys import Keys
from tests.conftest import ClientFactory
from tests.web.conftest import cookie, submit
from web.monitors import store as throughput
from web.monitors.store import DEFAULT_S, MAX_S, WINDOW_S, ThroughputMeter

Client = TestClient[Any, Any]
ME = "backpressure-client-01"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_estimate_from_samples() -> None:
    clock = FakeClock()
    meter = ThroughputMeter(clock)
    assert meter.retry_after(100) == DEFAULT_S  # no rate measured yet
    meter.add(finished=10, depth=40)
    clock.now += 0.5
    meter.add(finished=11, depth=40)
    assert meter.rate() is None and meter.retry_after(100) == DEFAULT_S  # too short a span
    clock.now += 4.5
    meter.add(finished=20, depth=40)  # 10 jobs in 5 s
    assert meter.rate() == pytest.approx(2.0)
    assert meter.retry_after(10) == 5
    assert meter.retry_after() == 20  # the sampled depth
    assert meter.retry_after(40, share=4) == 5  # the next of a client's 4 jobs
    assert meter.retry_after(1) == 1  # at least a second
    assert meter.retry_after(10**6) == MAX_S  # at most five minutes
    # Samples older than the window stop counting: only the recent pace matters.
    for _ in range(int(WINDOW_S) + 5):
        clock.now += 1
        meter.add(finished=20 + (clock.now > 1030), depth=40)
    assert meter.span <= WINDOW_S + 1
    assert meter.rate() == pytest.approx(1 / meter.span)
    # Nothing finished over a whole window while jobs wait: the longest answer.
    for _ in range(int(WINDOW_S) + 5):
        clock.now += 1
        meter.add(finished=21, depth=40)
    assert meter.rate() == 0 and meter.retry_after() == MAX_S
    meter.add(finished=0, depth=0)  # counters reset (Redis lost its data): start over
    assert meter.rate() is None


@contextlib.asynccontextmanager
async def completions(aredis: Redis, keys: Keys, per_s: float) -> Any:
    """Bump the stats hash's 'succeeded' counter as workers would, `per_s` times a second."""

    async def bump() -> None:
        while True:
            await aredis.hincrby(keys.stats, "succeeded", 1)
            await asyncio.sleep(1 / per_s)

    task = asyncio.create_task(bump())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _refused(client: Client, code: str) -> int:
    headers = cookie(client, ME)
    response = await client.post("/v1/tts/jobs", json={"text": "one more"}, headers=headers)
    body = await response.json()
    assert response.status == 429, body
    assert body["error"]["code"] == code and body["error"]["type"] == "rate_limit_error"
    retry_after = response.headers["Retry-After"]
    assert retry_after.isdigit(), retry_after  # delta-seconds, never a float or a date
    return int(retry_after)


async def test_retry_after_follows_measured_throughput(
    make_client: ClientFactory, aredis: Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(throughput, "SAMPLE_S", 0.05)
    pace = 4.0  # jobs finished per second, by "workers" that serve other queues' clients
    async with completions(aredis, keys, pace):
        # One client fills the queue: no share of it (a lone owner's share is half the backlog).
        small = await make_client(max_backlog=8, max_backlog_per_owner=0)
        for i in range(8):
            await submit(small, text=f"job {i}")
        await asyncio.sleep(1.5)  # the meter needs a second of samples
        first = await _refused(small, "backlog_full")
        assert abs(first - math.ceil(8 / pace)) <= 1, first
        # The same queue, a larger cap: a longer backlog means a longer wait.
        large = await make_client(max_backlog=24, max_backlog_per_owner=0)
        for i in range(16):
            await submit(large, text=f"more {i}")
        await asyncio.sleep(1.5)
        second = await _refused(large, "backlog_full")
        assert abs(second - math.ceil(24 / pace)) <= 2, second
        assert 1 <= first < second <= MAX_S
        # Legacy clients get the same estimate (FastAPI's error shape).
        legacy = await large.post("/tts/submit", json={"text": "old client"})
        assert legacy.status == 429 and "detail" in await legacy.json()
        assert abs(int(legacy.headers["Retry-After"]) - second) <= 1


async def test_per_client_cap_is_429_and_frees_up(make_client: ClientFactory) -> None:
    client = await make_client(max_active_per_client=2)
    jobs = [
        await (
            await client.post("/v1/tts/jobs", json={"text": text}, headers=cookie(client, ME))
        ).json()
        for text in ("first", "second")
    ]
    retry_after = await _refused(client, "too_many_active_jobs")
    assert 1 <= retry_after <= MAX_S
    # Another client is not held back by this one.
    other = await client.post(
        "/v1/tts/jobs", json={"text": "hi"}, headers=cookie(client, "someone-else-0001")
    )
    assert other.status == 202
    # A finished (here: cancelled) job frees a place.
    mine = cookie(client, ME)
    assert (await client.delete(f"/v1/tts/jobs/{jobs[0]['id']}", headers=mine)).status == 202
    response = await client.post("/v1/tts/jobs", json={"text": "third"}, headers=cookie(client, ME))
    assert response.status == 202, await response.text()


async def test_idempotent_retry_is_answered_even_when_full(make_client: ClientFactory) -> None:
    client = await make_client(max_backlog=1)
    headers = {**cookie(client, ME), "Idempotency-Key": "order-7"}
    response = await client.post("/v1/tts/jobs", json={"text": "mine"}, headers=headers)
    assert response.status == 202
    job = await response.json()
    await _refused(client, "backlog_full")
    # A retry of the accepted submit is not new work: the same job, not a 429.
    retry = await client.post("/v1/tts/jobs", json={"text": "mine"}, headers=headers)
    assert retry.status == 202
    assert (await retry.json())["id"] == job["id"]


async def test_fifty_concurrent_submits_with_one_key_make_one_job(
    client: Client, aredis: Redis, keys: Keys
) -> None:
    async def post(headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
        response = await client.post("/v1/tts/jobs", json={"text": "once"}, headers=headers)
        return response.status, await response.json()

    headers = {**cookie(client, ME), "Idempotency-Key": "retry-storm"}
    answers = await asyncio.gather(*(post(headers) for _ in range(50)))
    assert {status for status, _ in answers} == {202}
    ids = {body["id"] for _, body in answers}
    assert len(ids) == 1, ids
    assert sum(1 for _, body in answers if not body.get("duplicate")) == 1
    assert await aredis.hget(keys.fair, "queued") == b"1"
    assert await aredis.hget(keys.stats, "submitted") == b"1"
    # The key belongs to its client: another client's same key is another job.
    another = {**cookie(client, "another-client-01"), "Idempotency-Key": "retry-storm"}
    others = await asyncio.gather(*(post(another) for _ in range(10)))
    other_ids = {body["id"] for _, body in others}
    assert len(other_ids) == 1 and other_ids != ids
    assert await aredis.hget(keys.fair, "queued") == b"2"
