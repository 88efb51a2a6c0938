"""`Queue.progress` against a real Redis: segments stored once each and in order; the last one
again (a retry whose first answer was lost) is taken as stored; anything else out of order
is not."""

from __future__ import annotations

from redis.asyncio import Redis

from core.infra.settings import Settings
from core.queue.job import SynthesisRequest
from core.queue.keys import CONSUMER_GROUP
from core.queue.store import Queue, SegmentDone, Started


def segment(index: int) -> SegmentDone:
    cue = {"start": 0, "end": 10, "from": 0, "to": 5}
    return SegmentDone(index, 3, f"audio {index}".encode(), 0.5, 12_000, 24_000, cue)


async def test_a_repeated_segment_is_stored_once_and_a_skipped_one_is_refused(
    settings: Settings, aredis: Redis
) -> None:
    queue = Queue(aredis, settings)
    await queue.ensure_group()
    submitted = await queue.enqueue(SynthesisRequest(text="One. Two. Three."), "c1")
    read = await aredis.xreadgroup(CONSUMER_GROUP, "w", {queue.keys.jobs: ">"}, count=1)
    started = await queue.start(submitted.job_id, read[0][1][0][0].decode(), "w")
    assert isinstance(started, Started)
    job_id, token = submitted.job_id, started.token
    assert await queue.progress(job_id, "c1", token, segment(1)) == "ok"
    assert await queue.progress(job_id, "c1", token, segment(1)) == "ok"  # the retry
    assert await queue.stored.segments(job_id) == [b"audio 1"]
    assert await aredis.llen(queue.keys.cues(job_id)) == 1
    assert await queue.progress(job_id, "c1", token, segment(3)) == "lost"  # 2 is missing
    assert await queue.progress(job_id, "c1", "another attempt", segment(2)) == "lost"
    assert await queue.progress(job_id, "c1", token, segment(2)) == "ok"
    assert await queue.stored.segments(job_id) == [b"audio 1", b"audio 2"]
    job = await queue.get(job_id)
    assert job is not None and job.segments_done == 2
    events = await aredis.xrange(queue.keys.job_events(job_id))
    progress = [e for _, e in events if b'"progress"' in e.get(b"data", b"")]
    assert len(progress) == 2
