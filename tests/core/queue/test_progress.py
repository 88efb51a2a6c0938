"""`Queue.progress` against a real Redis: segments stored once each and in order; the last one
again (a retry whose first answer was lost) is taken as stored; anything else out of order
is not."""

from __future__ import annotations

from redis.asyncio import Redis

from core.infra.settings import Settings
from core.queue.job import SynthesisRequest
from core.queue.results import SegmentDone, Started
from core.queue.store import Queue


def segment(index: int) -> SegmentDone:
    cue = {"start": 0, "end": 10, "from": 0, "to": 5}
    return SegmentDone(index, 3, f"audio {index}".encode(), 0.5, 12_000, 24_000, cue)


async def test_a_repeated_segment_is_stored_once_and_a_skipped_one_is_refused(
    settings: Settings, aredis: Redis
) -> None:
    queue = Queue(aredis, settings)
    await queue.ensure_group()
    submitted = await queue.enqueue(SynthesisRequest(text="One. Two. Three."), "c1")
    taken = await queue.work.take("w", 1)
    started = await queue.work.start(submitted.job_id, taken[0][1], "w")
    assert isinstance(started, Started)
    job_id, token = submitted.job_id, started.token
    assert await queue.work.progress(job_id, "c1", token, segment(1)) == "ok"
    assert await queue.work.progress(job_id, "c1", token, segment(1)) == "ok"  # the retry
    assert await queue.stored.segments(job_id) == [b"audio 1"]
    assert await aredis.llen(queue.keys.cues(job_id)) == 1
    assert await queue.work.progress(job_id, "c1", token, segment(3)) == "lost"  # 2 is missing
    assert await queue.work.progress(job_id, "c1", "another attempt", segment(2)) == "lost"
    assert await queue.work.progress(job_id, "c1", token, segment(2)) == "ok"
    assert await queue.stored.segments(job_id) == [b"audio 1", b"audio 2"]
    job = await queue.get(job_id)
    assert job is not None and job.segments_done == 2
    events = await aredis.xrange(queue.keys.job_events(job_id))
    progress = [e for _, e in events if b'"progress"' in e.get(b"data", b"")]
    assert len(progress) == 2


async def test_a_released_document_resumes_after_its_stored_parts(
    settings: Settings, aredis: Redis
) -> None:
    """A document given back (shutdown past its grace, a retried engine error) keeps its parts:
    the next start resumes after them, so no part is stored twice."""
    queue = Queue(aredis, settings)
    await queue.ensure_group()
    submitted = await queue.enqueue(SynthesisRequest(text="One. Two. Three."), "c1", document=True)
    job_id = submitted.job_id
    taken = await queue.work.take("w", 1)
    started = await queue.work.start(job_id, taken[0][1], "w")
    assert isinstance(started, Started) and started.document
    for index in (1, 2):
        done = SegmentDone(index, 3, b"pcm %d" % index, 0.5, 12_000, 24_000, {}, document=True)
        assert await queue.work.progress(job_id, "c1", started.token, done) == "ok"
    assert await queue.work.release(job_id, "c1", started.token, "shutting down")

    taken = await queue.work.take("w2", 1)
    again = await queue.work.start(job_id, taken[0][1], "w2")
    assert isinstance(again, Started)
    assert (again.segments_done, again.samples_done) == (2, 24_000)
    done = SegmentDone(3, 3, b"pcm 3", 0.5, 12_000, 24_000, {}, document=True)
    assert await queue.work.progress(job_id, "c1", again.token, done) == "ok"
    assert await aredis.lrange(queue.keys.parts(job_id), 0, -1) == [b"pcm 1", b"pcm 2", b"pcm 3"]
    assert await aredis.llen(queue.keys.cues(job_id)) == 3


async def test_a_released_document_cancelled_keeps_its_charge_with_its_parts(
    settings: Settings, aredis: Redis
) -> None:
    """Cancelled while queued after a run that stored parts, a document keeps what it stored
    charged (and its record) until it expires; one that never ran gives its charge back."""
    settings = settings.replace(job_ttl_s=3600)  # longer than a never-run job is kept
    queue = Queue(aredis, settings)
    await queue.ensure_group()
    request = SynthesisRequest(text="One. Two. Three.")
    ran = await queue.enqueue(request, "c1", document=True, expected_bytes=1000)
    never = await queue.enqueue(request, "c1", document=True, expected_bytes=500)
    taken = await queue.work.take("w", 1)
    started = await queue.work.start(ran.job_id, taken[0][1], "w")
    assert isinstance(started, Started)
    done = SegmentDone(1, 3, b"pcm 1", 0.5, 12_000, 24_000, {}, document=True)
    assert await queue.work.progress(ran.job_id, "c1", started.token, done) == "ok"
    assert await queue.work.release(ran.job_id, "c1", started.token, "shutting down")

    assert (await queue.cancel(never.job_id, "c1"))[0] == "cancelled"
    assert (await queue.cancel(ran.job_id, "c1"))[0] == "cancelled"
    usage = queue.keys.usage("c1")
    assert await aredis.hget(usage, never.job_id) is None
    assert int(await aredis.hget(usage, ran.job_id) or 0) == 1000
    assert int(await aredis.hget(usage, "total") or 0) == 1000
    assert await aredis.ttl(queue.keys.job(ran.job_id)) > settings.redis.unstarted_ttl_s
    assert await aredis.ttl(queue.keys.job(never.job_id)) <= settings.redis.unstarted_ttl_s
    assert await aredis.lrange(queue.keys.parts(ran.job_id), 0, -1) == [b"pcm 1"]
