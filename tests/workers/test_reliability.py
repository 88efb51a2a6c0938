"""Delivery guarantees with real processes: crashes, poison jobs, leases, fencing, restarts."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from redis.asyncio import Redis

from core.infra.embedded_redis import EmbeddedRedis
from core.infra.settings import Settings
from core.queue.job import JobState, SynthesisRequest
from core.queue.keys import CONSUMER_GROUP
from core.queue.results import BacklogFull, ClientCapReached, Started
from core.queue.store import Queue
from tests.conftest import WorkerProcess
from tests.support.jobs import LONG_TEXT, wait_running, wait_terminal


async def test_killed_worker_job_completes_elsewhere_once(
    settings: Settings, aredis: Redis, start_worker: Callable[..., WorkerProcess]
) -> None:
    queue = Queue(aredis, settings)
    first = start_worker("victim")
    submitted = await queue.enqueue(SynthesisRequest(text=LONG_TEXT, voice="en_male"), "c1")
    assert await wait_running(queue, submitted.job_id) == "victim"
    first.kill()
    killed_at = time.monotonic()
    start_worker("rescuer")
    events = await wait_terminal(queue, submitted.job_id, timeout=30)
    recovered_in = time.monotonic() - killed_at
    terminal = [e for e in events if e["type"] in ("succeeded", "failed", "dead", "cancelled")]
    assert [e["type"] for e in terminal] == ["succeeded"]
    job = await queue.get(submitted.job_id)
    assert job is not None and job.attempts == 2
    assert (await queue.stats())["reclaimed"] == 1
    # Recovery within lease + reclaim interval (+ synthesis time and process start-up).
    assert (
        recovered_in < (settings.worker.lease_ms + settings.worker.reclaim_interval_ms) / 1000 + 20
    )


async def test_poison_job_goes_to_dead_letters_while_others_flow(
    settings: Settings, aredis: Redis, start_worker: Callable[..., WorkerProcess]
) -> None:
    queue = Queue(aredis, settings)
    workers = {"w0": start_worker("w0")}
    poison = await queue.enqueue(SynthesisRequest(text=LONG_TEXT, voice="en_female"), "c1")
    others = [
        (await queue.enqueue(SynthesisRequest(text=f"Job {i} is fine.", voice="en_male"), "c2"))
        for i in range(6)
    ]
    owner = None
    for crash in range(settings.worker.max_deliveries):
        owner = await wait_running(queue, poison.job_id, timeout=30, not_owner=owner)
        workers.pop(owner).kill()  # the job "crashes its worker" every time
        workers[f"w{crash + 1}"] = start_worker(f"w{crash + 1}")
    events = await wait_terminal(queue, poison.job_id, timeout=30)
    assert events[-1]["type"] == "dead"
    error = events[-1]["job"]["error"]
    assert "deliveries" in error and owner not in error  # a worker's name: host and pid
    dlq = await aredis.xrange(queue.keys.dlq)
    assert [fields[b"id"].decode() for _, fields in dlq] == [poison.job_id]
    assert owner in dlq[0][1][b"reason"].decode()  # the operator's entry names it
    for other in others:
        assert (await wait_terminal(queue, other.job_id))[-1]["type"] == "succeeded"


async def test_long_job_with_healthy_lease_is_never_stolen(
    settings: Settings, aredis: Redis, start_worker: Callable[..., WorkerProcess]
) -> None:
    # A lease of a second, renewed every third of it: short beside the job, and long enough that
    # a shared 2-core machine's pauses (an fsync, a collection) never let it lapse.
    settings = settings.replace(lease_ms=1000)
    queue = Queue(aredis, settings)
    start_worker("holder", CHATTTS_LEASE_MS="1000")
    start_worker("thief", CHATTTS_LEASE_MS="1000")
    text = " ".join([LONG_TEXT] * 3)
    # MP3: encoding adds to the job's time, and it keeps a tenth of WAV's bytes in the session's
    # shared Redis (WAV kept 84 MB, which later tests' jobs then had no room for).
    request = SynthesisRequest(text=text, voice="en_male", format="mp3")
    submitted = await queue.enqueue(request, "c1")
    events = await wait_terminal(queue, submitted.job_id, timeout=60)
    job = await queue.get(submitted.job_id)
    assert job is not None and job.started_at and job.finished_at
    assert job.finished_at - job.started_at > 2.0  # it outlived the lease twice at least
    assert events[-1]["type"] == "succeeded" and job.attempts == 1
    assert [e["type"] for e in events].count("running") == 1
    assert "reclaimed" not in await queue.stats()


async def test_stale_worker_completion_is_refused(settings: Settings, aredis: Redis) -> None:
    queue = Queue(aredis, settings)
    await queue.ensure_group()
    submitted = await queue.enqueue(SynthesisRequest(text="Hello", voice="en_male"), "c1")
    entry = (await queue.work.take("slow", 1))[0][1]
    slow = await queue.work.start(submitted.job_id, entry, "slow")
    assert isinstance(slow, Started)
    await asyncio.sleep(0.05)
    claimed = await aredis.xautoclaim(queue.keys.jobs, CONSUMER_GROUP, "fast", 10, "0-0")
    assert [e[0].decode() for e in claimed[1]] == [entry]
    fast = await queue.work.start(submitted.job_id, entry, "fast")
    assert isinstance(fast, Started) and fast.token != slow.token
    assert await queue.work.renew(submitted.job_id, slow.token, "slow") == "lost"
    assert not await queue.work.complete(submitted.job_id, "c1", slow.token, b"late", 1.0, 24_000)
    assert not await queue.work.finish(submitted.job_id, "c1", slow.token, "failed", "late")
    assert await queue.work.complete(submitted.job_id, "c1", fast.token, b"audio", 1.0, 24_000)
    assert await queue.stored.file(submitted.job_id) == b"audio"
    assert (await queue.stats())["fenced"] == 2


async def test_ten_concurrent_reclaimers_never_start_a_job_twice(
    settings: Settings, aredis: Redis
) -> None:
    queue = Queue(aredis, settings)
    await queue.ensure_group()
    ids = [(await queue.enqueue(SynthesisRequest(text=f"job {i}"), "c1")).job_id for i in range(30)]
    assert len(await queue.work.take("dead-worker", 100)) == 30
    lease_ms = 1_000
    await asyncio.sleep(lease_ms / 1000 + 0.1)  # every entry's lease has now expired
    starts: list[tuple[str, str]] = []

    async def reclaimer(name: str) -> None:
        client = Redis.from_url(settings.redis.redis_url or "")
        mine = Queue(client, settings)
        try:
            cursor = "0-0"
            while True:  # one sweep of the pending list, following XAUTOCLAIM's cursor
                result = await client.xautoclaim(
                    queue.keys.jobs, CONSUMER_GROUP, name, lease_ms, cursor, count=2
                )
                cursor = result[0].decode()
                if cursor == "0-0" and not result[1]:
                    return
                for entry_id, fields in result[1]:
                    started = await mine.work.start(fields[b"id"].decode(), entry_id.decode(), name)
                    if isinstance(started, Started):
                        starts.append((fields[b"id"].decode(), name))
        finally:
            await client.aclose()

    await asyncio.gather(*(reclaimer(f"r{i}") for i in range(10)))
    started_ids = [job_id for job_id, _ in starts]
    assert sorted(started_ids) == sorted(ids)  # every job started exactly once
    assert len({name for _, name in starts}) > 1  # the work really was spread


async def test_redis_restart_mid_run_loses_no_job(
    settings: Settings, tmp_path: Path, start_worker: Callable[..., WorkerProcess]
) -> None:
    server = EmbeddedRedis(tmp_path / "redis", appendonly=True).start()
    try:
        settings = settings.replace(redis_url=server.url)
        client = Redis.from_url(server.url)
        queue = Queue(client, settings)
        start_worker("a", CHATTTS_REDIS_URL=server.url)
        start_worker("b", CHATTTS_REDIS_URL=server.url)
        ids = [
            (
                await queue.enqueue(
                    SynthesisRequest(text=f"Job {i}. " * 8, voice="en_male"), f"c{i % 3}"
                )
            ).job_id
            for i in range(40)
        ]
        await asyncio.sleep(0.3)
        server.stop()  # SIGTERM: Redis fsyncs its append-only file and exits
        await asyncio.sleep(1.0)
        server.start()
        await client.aclose()
        client = Redis.from_url(server.url)
        queue = Queue(client, settings)
        for job_id in ids:
            events = await wait_terminal(queue, job_id, timeout=60)
            assert events[-1]["type"] == "succeeded", events[-1]
        await client.aclose()
    finally:
        server.stop()


async def test_idempotency_key_makes_one_job_from_fifty_submits(
    settings: Settings, aredis: Redis
) -> None:
    queue = Queue(aredis, settings)
    request = SynthesisRequest(text="only once")
    results = await asyncio.gather(
        *(queue.enqueue(request, "c1", idempotency_key="k-1") for _ in range(50))
    )
    assert len({r.job_id for r in results}) == 1
    assert sum(not r.duplicate for r in results) == 1
    assert await queue.depth() == 1


async def test_backlog_and_client_caps(settings: Settings, aredis: Redis) -> None:
    changes = {"max_backlog": 5, "max_active_per_client": 3, "max_backlog_per_owner": 0}
    queue = Queue(aredis, settings.replace(**changes))
    for _ in range(3):
        await queue.enqueue(SynthesisRequest(text="x y"), "greedy")
    with pytest.raises(ClientCapReached):
        await queue.enqueue(SynthesisRequest(text="x y"), "greedy")
    for _ in range(2):
        await queue.enqueue(SynthesisRequest(text="x y"), "other")
    with pytest.raises(BacklogFull) as full:
        await queue.enqueue(SynthesisRequest(text="x y"), "third")
    assert full.value.depth == 5 and full.value.status == 429


async def test_cancel_queued_and_running_jobs(
    settings: Settings, aredis: Redis, start_worker: Callable[..., WorkerProcess]
) -> None:
    queue = Queue(aredis, settings)
    queued = await queue.enqueue(SynthesisRequest(text="never spoken"), "c1")
    assert await queue.cancel(queued.job_id) == ("cancelled", None)
    running = await queue.enqueue(SynthesisRequest(text=LONG_TEXT, voice="en_male"), "c1")
    start_worker("w")
    await wait_running(queue, running.job_id)
    while (await queue.get(running.job_id)).segments_done < 1:  # type: ignore[union-attr]
        await asyncio.sleep(0.01)  # under way: its first segment stored
    assert (await queue.cancel(running.job_id))[0] == "cancelling"
    events = await wait_terminal(queue, running.job_id)
    assert events[-1]["type"] == "cancelled"
    job = await queue.get(running.job_id)
    assert job is not None and job.state is JobState.CANCELLED
    assert job.segments_done < job.segments_total  # it stopped early
    queued_events = await wait_terminal(queue, queued.job_id)
    assert [e["type"] for e in queued_events] == ["queued", "cancelled"]
    assert await queue.cancel(queued.job_id) == ("terminal", "cancelled")
    assert await aredis.scard(queue.keys.active("c1")) == 0


async def test_shutdown_past_grace_releases_job_without_counting(
    settings: Settings, aredis: Redis, start_worker: Callable[..., WorkerProcess]
) -> None:
    queue = Queue(aredis, settings)
    leaving = start_worker("leaving", CHATTTS_SHUTDOWN_GRACE_S="0.2")
    text = " ".join([LONG_TEXT] * 4)
    request = SynthesisRequest(text=text, voice="en_male", format="mp3")  # a tenth of WAV's bytes
    submitted = await queue.enqueue(request, "c1")
    await wait_running(queue, submitted.job_id)
    assert await asyncio.to_thread(leaving.stop) == 0
    job = await queue.get(submitted.job_id)
    assert job is not None and job.state is JobState.QUEUED and job.attempts == 0
    start_worker("next")
    events = await wait_terminal(queue, submitted.job_id, timeout=60)
    assert events[-1]["type"] == "succeeded"
    assert events[-1]["job"]["attempts"] == 1


async def test_a_full_redis_pauses_a_worker_and_its_job_ends_once_there_is_room(
    settings: Settings, tmp_path: Path, start_worker: Callable[..., WorkerProcess]
) -> None:
    """A document that fills Redis (noeviction) mid-run: the worker's writes are refused; it
    waits, never exits; the job ends once room is made."""
    with EmbeddedRedis(tmp_path / "small", maxmemory="8mb", config_command=True) as server:
        settings = settings.replace(redis_url=server.url)
        client = Redis.from_url(server.url)
        queue = Queue(client, settings)
        text = " ".join(f"Line {i} of a document that will not fit." for i in range(150))
        job_id = (
            await queue.enqueue(SynthesisRequest(text=text, voice="en_male"), "c", document=True)
        ).job_id
        worker = start_worker("w", CHATTTS_REDIS_URL=server.url)
        deadline = time.monotonic() + 60
        while b"command not allowed when used memory" not in worker.log().encode():
            assert worker.process.poll() is None, worker.log()
            assert time.monotonic() < deadline, f"Redis never filled up: {worker.log()[-3000:]}"
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)
        assert worker.process.poll() is None, worker.log()  # it waits; it did not crash
        await client.config_set("maxmemory", "0")  # room again
        events = await wait_terminal(queue, job_id, timeout=120)
        assert events[-1]["type"] == "succeeded", events[-1]
        await client.aclose()
