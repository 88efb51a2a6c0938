"""The worker process through the queue contract: jobs in, audio and events out."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable
from typing import Any

import numpy as np
import soundfile as sf
from redis.asyncio import Redis

from core.infra.settings import Settings
from core.queue.job import JobState, SynthesisRequest
from core.queue.store import Queue
from tests.conftest import WorkerProcess
from tests.support.jobs import wait_terminal


async def test_job_runs_to_success_with_ordered_events(
    settings: Settings, aredis: Redis, worker: WorkerProcess
) -> None:
    queue = Queue(aredis, settings)
    request = SynthesisRequest(text="你好，世界。Hello world.", voice="zh_female", format="wav")
    submitted = await queue.enqueue(request, client="c1")
    events = await wait_terminal(queue, submitted.job_id)
    # A one-segment job emits no progress event: its final file is its only segment.
    assert [e["type"] for e in events] == ["queued", "running", "succeeded"]
    job = await queue.get(submitted.job_id)
    assert job is not None and job.state is JobState.SUCCEEDED and job.attempts == 1
    data = await queue.stored.file(submitted.job_id)
    assert data is not None
    samples, rate = sf.read(io.BytesIO(data))
    assert rate == 24_000
    assert 0.8 < len(samples) / rate < 10
    assert np.abs(samples).max() > 0.05


async def test_a_registered_voice_fails_on_espeak_instead_of_a_stock_voice(
    settings: Settings, aredis: Redis, worker: WorkerProcess
) -> None:
    """eSpeak NG cannot speak a registered (ChatTTS) voice: the job fails saying so, rather
    than succeeding in a built-in voice nobody asked for."""
    from core.voices.chattts import builtin_embeddings

    queue = Queue(aredis, settings)
    record = b'{"name": "narrator-w", "builtin": false, "kind": "embedding"}'
    assert await queue.voices.register("narrator-w", "c1", record, builtin_embeddings()["en_male"])
    request = SynthesisRequest(text="Hello there.", voice="narrator-w")
    submitted = await queue.enqueue(request, client="c1")
    events = await wait_terminal(queue, submitted.job_id)
    assert events[-1]["type"] == "failed"
    job = await queue.get(submitted.job_id)
    assert job is not None and job.state is JobState.FAILED and job.error is not None
    assert "registered ChatTTS voice" in job.error and "espeak" in job.error


async def test_a_voice_deleted_before_its_job_ran_fails_saying_so(
    settings: Settings, aredis: Redis, worker: WorkerProcess
) -> None:
    """Whatever the engine, a registered voice gone by the time its job is taken is what the
    failure says, not what the engine could not have spoken."""
    queue = Queue(aredis, settings)
    submitted = await queue.enqueue(SynthesisRequest(text="Hi.", voice="gone-w"), client="c1")
    events = await wait_terminal(queue, submitted.job_id)
    job = await queue.get(submitted.job_id)
    assert events[-1]["type"] == "failed" and job is not None and job.error is not None
    assert job.error.startswith("voice 'gone-w' is not registered"), job.error


async def test_long_text_streams_segments(
    settings: Settings, aredis: Redis, worker: WorkerProcess
) -> None:
    queue = Queue(aredis, settings)
    text = " ".join(f"This is sentence number {i} of a longer text." for i in range(12))
    submitted = await queue.enqueue(SynthesisRequest(text=text, voice="en_male"), client="c1")
    events = await wait_terminal(queue, submitted.job_id)
    progress = [e for e in events if e["type"] == "progress"]
    assert len(progress) >= 2
    total = progress[0]["segment"]["total"]
    assert [e["segment"]["index"] for e in progress] == list(range(1, total + 1))
    assert events[-1]["type"] == "succeeded"
    assert len(await queue.stored.segments(submitted.job_id)) == total


async def test_every_format_decodes(
    settings: Settings, aredis: Redis, worker: WorkerProcess
) -> None:
    queue = Queue(aredis, settings)
    ids = {}
    for fmt in ("wav", "mp3", "opus", "ogg", "flac", "pcm"):
        request = SynthesisRequest(text="Hello there", voice="en_female", format=fmt)
        ids[fmt] = (await queue.enqueue(request, client="c1")).job_id
    for fmt, job_id in ids.items():
        await wait_terminal(queue, job_id)
        data = await queue.stored.file(job_id)
        assert data
        if fmt == "pcm":
            samples = np.frombuffer(data, "<i2")
            assert samples.size > 24_000 * 0.3
        else:
            samples, rate = sf.read(io.BytesIO(data))
            assert rate in (24_000, 48_000) and len(samples) > rate * 0.3, fmt


async def test_sigterm_finishes_job_in_hand_and_exits_zero(
    settings: Settings, aredis: Redis, worker: WorkerProcess
) -> None:
    queue = Queue(aredis, settings)
    text = " ".join(f"Sentence {i} keeps the worker busy for a while." for i in range(60))
    submitted = await queue.enqueue(SynthesisRequest(text=text, voice="en_male"), client="c1")
    while (job := await queue.get(submitted.job_id)) and job.state is JobState.QUEUED:
        await asyncio.sleep(0.01)
    assert await asyncio.to_thread(worker.stop) == 0
    events = await wait_terminal(queue, submitted.job_id, timeout=5)
    assert events[-1]["type"] == "succeeded"


async def test_identical_request_is_answered_from_the_cache(
    settings: Settings, aredis: Redis, worker: WorkerProcess
) -> None:
    """Per client by default: another client's identical request is synthesized afresh (an
    instant answer would tell it what someone else submitted)."""
    queue = Queue(aredis, settings)
    request = SynthesisRequest(text="Cache me if you can.", voice="en_female", format="mp3")
    ids = []
    for client, req in [
        ("c1", request),
        ("c1", request),
        ("c2", request),
        ("c1", request.model_copy(update={"cache": False})),
    ]:
        submitted = await queue.enqueue(req, client=client)
        await wait_terminal(queue, submitted.job_id)
        ids.append(submitted.job_id)
    jobs = [await queue.get(job_id) for job_id in ids]
    assert [j.cached for j in jobs if j] == [False, True, False, False]
    assert await queue.stored.file(ids[0]) == await queue.stored.file(ids[1])
    stats = await queue.stats()
    assert stats["cache_hits"] == 1 and stats["cache_misses"] == 2


async def test_a_global_cache_answers_every_client(
    settings: Settings, aredis: Redis, start_worker: Callable[..., WorkerProcess]
) -> None:
    start_worker(CHATTTS_CACHE_SCOPE="global")
    queue = Queue(aredis, settings)
    request = SynthesisRequest(text="Shared by all.", voice="en_female")
    cached = []
    for client in ("c1", "c2"):
        submitted = await queue.enqueue(request, client=client)
        await wait_terminal(queue, submitted.job_id)
        job = await queue.get(submitted.job_id)
        assert job is not None
        cached.append(job.cached)
    assert cached == [False, True]


async def test_high_priority_jobs_run_before_the_bulk_backlog(
    settings: Settings, aredis: Redis, start_worker: Any
) -> None:
    """Under the FIFO scheduler, "high" jobs have their own stream, read first (the fair one's
    order is tests/workers/test_fairness.py's)."""
    queue = Queue(aredis, settings.replace(scheduler="fifo"))
    bulk = [
        (await queue.enqueue(SynthesisRequest(text=f"Bulk job {i}.", voice="en_male"), "bulk"))
        for i in range(6)
    ]
    urgent = await queue.enqueue(
        SynthesisRequest(text="Urgent.", voice="en_male", priority="high"), "key-live"
    )  # an API key's client: "high" is for keys alone
    assert await queue.depth() == 7
    start_worker()
    for submitted in [*bulk, urgent]:
        await wait_terminal(queue, submitted.job_id)
    started = {}
    for submitted in [*bulk, urgent]:
        job = await queue.get(submitted.job_id)
        assert job is not None and job.started_at is not None
        started[submitted.job_id] = job.started_at
    assert min(started, key=started.__getitem__) == urgent.job_id


async def test_asked_twice_a_worker_hands_its_jobs_back_at_once(
    settings: Settings, aredis: Redis, start_worker: Callable[..., WorkerProcess]
) -> None:
    """The first SIGTERM (or Ctrl-C) lets the job in hand finish within the grace period; a
    second, a moment later, hands it back to the queue now and the worker exits."""
    import signal
    import time

    queue = Queue(aredis, settings)
    await queue.ensure_group()
    worker = start_worker(
        CHATTTS_ENGINE="tests.workers.engines.tone", CHATTTS_SHUTDOWN_GRACE_S="120"
    )
    text = " ".join(f"Word number {n}." for n in range(6000))  # many seconds of engine steps
    submitted = await queue.enqueue(SynthesisRequest(text=text, voice="en_male"), "key-a")
    deadline = time.monotonic() + 30
    while (job := await queue.get(submitted.job_id)) and job.segments_done < 2:
        assert time.monotonic() < deadline, "the job never got going"
        await asyncio.sleep(0.05)
    worker.process.send_signal(signal.SIGTERM)
    await asyncio.sleep(1.5)
    assert worker.process.poll() is None  # finishing the job, within its grace
    job = await queue.get(submitted.job_id)
    assert job is not None and job.state == JobState.RUNNING
    asked = time.monotonic()
    worker.process.send_signal(signal.SIGTERM)
    await asyncio.to_thread(worker.process.wait, 10)
    assert time.monotonic() - asked < 5
    job = await queue.get(submitted.job_id)
    assert job is not None and job.state == JobState.QUEUED, job
    assert "handing its jobs back now" in worker.log()
