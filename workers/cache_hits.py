"""A job answered from the result cache (core/queue/cache.py): the cached file, or a copy of its
object in the audio store, recorded as the job's result."""

from __future__ import annotations

import logging

import orjson

from core.queue.store import Queue
from workers.jobs import ActiveJob
from workers.metrics import WorkerMetrics

log = logging.getLogger("chattts_online.worker")


async def answer_from_cache(
    queue: Queue, metrics: WorkerMetrics, worker: str, job: ActiveJob, digest: str
) -> bool:
    """Finish `job` with the result cache's entry for `digest` (True), or say there is none to
    use (False: synthesize it)."""
    cached = await queue.stored.cached(digest)
    metrics.cache_lookup(bool(cached))
    if not cached:
        return False
    stored, audio_ref, size = queue.stored, None, None
    if cached.get(b"audio_ref"):  # the result is an object of the audio store: copy it
        if stored.store is None:
            return False  # written by a worker with a store this one has not: synthesize
        audio_ref = await stored.copy_for("jobs", job.job_id, cached[b"audio_ref"].decode())
        if audio_ref is None:
            return False  # swept meanwhile: synthesize
        size = int(cached[b"audio_size"])
    elif b"audio" not in cached:
        return False
    ok = await queue.work.complete(
        job.job_id,
        job.started.client,
        job.started.token,
        b"" if audio_ref else cached[b"audio"],
        float(cached[b"duration_s"]),
        int(cached[b"sample_rate"]),
        cached=True,
        stream=job.started.stream,
        cache_digest=digest,
        document_size=size,
        audio_ref=audio_ref,
        new_cues=orjson.loads(cached[b"cues"]) if cached.get(b"cues") else None,
    )
    if not ok:
        await stored.discard(audio_ref)
    if ok:
        metrics.outcome("cache_hit")
        log.info(
            "worker %s: job %s answered from the cache",
            worker,
            job.job_id,
            extra={"job_id": job.job_id},
        )
    else:
        metrics.completion_refused()
    return True
