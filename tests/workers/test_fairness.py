"""The fair scheduler with real worker processes: one client's backlog delays another's job by
about one job per worker, and a document gives its worker back to a short job and resumes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from redis.asyncio import Redis

from core.infra.settings import Settings
from core.queue.job import SynthesisRequest
from core.queue.store import Queue
from tests.conftest import WorkerProcess
from tests.support.jobs import wait_terminal

# About 15 s of speech: a tenth of a second of eSpeak NG, long enough to keep both workers busy.
FLOOD = "A flood of work from one client, sentence after sentence, keeps the workers busy. " * 2
DOCUMENT = " ".join(f"Sentence number {i} of a long document read aloud." for i in range(80))


async def test_a_backlog_delays_another_client_by_one_job_per_worker(
    settings: Settings, aredis: Redis, start_worker: Callable[..., WorkerProcess]
) -> None:
    """Two workers busy with one client's backlog: another client's job is the next one either
    takes, not the backlog's last."""
    queue = Queue(aredis, settings)
    await queue.ensure_group()
    workers = [start_worker(), start_worker()]
    flood = [
        await queue.enqueue(SynthesisRequest(text=f"{FLOOD} {i}.", voice="en_male"), "key-a")
        for i in range(16)
    ]
    late = await queue.enqueue(SynthesisRequest(text="Late job.", voice="en_male"), "key-b")
    for submitted in [*flood, late]:
        await wait_terminal(queue, submitted.job_id, timeout=60)
    starts = []
    for submitted in [*flood, late]:
        job = await queue.get(submitted.job_id)
        assert job is not None and job.started_at is not None and job.state == "succeeded"
        starts.append((job.started_at, submitted.job_id))
    for worker in workers:  # both took from the one room
        assert "succeeded" in worker.log_path.read_text(), worker.name
    rank = [job_id for _, job_id in sorted(starts)].index(late.job_id)
    assert rank <= 5, rank  # the jobs in the two hands, then it; in FIFO order it is 17th


async def test_documents_take_turns_and_a_short_job_goes_between(
    settings: Settings, aredis: Redis, start_worker: Callable[..., WorkerProcess]
) -> None:
    """Two clients' documents and one worker: it holds one document (the rest of its hand is
    kept for interactive work), which after a slice goes back to the queue for the other
    client's, and resumes after its stored parts (each part stored once). A short job that
    arrives meanwhile runs at once."""
    queue = Queue(aredis, settings)
    await queue.ensure_group()
    start_worker(CHATTTS_FAIR_SLICE_S="2")
    request = SynthesisRequest(text=DOCUMENT, voice="en_male")
    docs = [await queue.enqueue(request, f"key-docs-{n}", document=True) for n in range(2)]
    while (await queue.get(docs[0].job_id)).segments_done < 2:  # type: ignore[union-attr]
        await asyncio.sleep(0.01)
    short = await queue.enqueue(SynthesisRequest(text="Short.", voice="en_male"), "key-short")
    await wait_terminal(queue, short.job_id, timeout=60)
    finished = await queue.get(short.job_id)
    assert finished is not None and finished.state == "succeeded" and finished.finished_at
    yielded = 0
    for doc in docs:
        events = await wait_terminal(queue, doc.job_id, timeout=120)
        job = await queue.get(doc.job_id)
        assert job is not None and job.state == "succeeded" and job.finished_at
        assert job.attempts == 1  # handing back costs no delivery
        parts = await aredis.llen(queue.keys.parts(doc.job_id))
        assert parts == job.segments_total == job.segments_done
        assert finished.finished_at < job.finished_at
        handed_back = [e for e in events if e["type"] == "queued" and e.get("yielded")]
        assert [e["type"] for e in events].count("running") == len(handed_back) + 1
        yielded += len(handed_back)
    assert yielded >= 2  # each document waited for the other at least once
