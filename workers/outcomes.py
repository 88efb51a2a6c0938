"""What happens to the jobs in a worker's hand: segments published, results stored, failures.

Every outcome is one fenced Lua script (core/queue/lua/); a refused one means the job was
reclaimed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Collection

import numpy as np
from redis.exceptions import RedisError, ResponseError

from core.audio import formats as audio
from core.audio.catalog import CATALOG
from core.audio.isolated import CodecProcess
from core.audio_store.base import StoreError
from core.infra.redis_client import REDIS_UNAVAILABLE
from core.queue.results import SegmentDone, Started
from workers.checks.verdict import Verdict
from workers.chunks import ChunkPublisher
from workers.context import WorkerContext
from workers.documents import EncodeStopped, discard_draft, document_file
from workers.engines import EngineError, Segment
from workers.jobs import ActiveJob, Hold, render

log = logging.getLogger("chattts_online.worker")
# What a document's finished segment leaves in the worker's hand: its samples are in Redis.
_STORED = np.zeros(0, np.float32)
# A segment's store is retried through a Redis outage of about 3 s (0.2 + 0.4 + 0.8 + 1.6),
# well inside a lease; past that, the job's lease decides.
PROGRESS_RETRY_S = 0.2
PROGRESS_RETRY_MAX_S = 1.6


class Outcomes:
    def __init__(self, ctx: WorkerContext, chunks: ChunkPublisher) -> None:
        self.name, self.queue, self.settings = ctx.name, ctx.queue, ctx.settings
        self.in_hand, self.engine, self.metrics = ctx.in_hand, ctx.engine, ctx.metrics
        self.chunks = chunks
        self.completions: set[asyncio.Task[None]] = set()
        self.storing: set[str] = set()  # jobs whose result is being encoded and stored
        # Files in formats of native encoders are made in a child: a crash fails that job only.
        self.codecs = CodecProcess()

    async def fail(self, job_id: str, started: Started, reason: str) -> None:
        """A started job that cannot run (bad voice, nothing to speak): it fails at once."""
        await self._finish(job_id, started, "failed", reason)
        self.metrics.outcome("failed")

    def complete_in_background(self, job: ActiveJob) -> None:
        """Encode and store a finished job while the engine goes on with other work. A job whose
        store fails stays in hand, to be stored again on a later round."""
        self.storing.add(job.job_id)
        task = asyncio.create_task(self._complete_or_retry(job), name=f"complete-{job.job_id}")
        self.completions.add(task)
        task.add_done_callback(self.completions.discard)
        task.add_done_callback(lambda _: self.storing.discard(job.job_id))

    async def _complete_or_retry(self, job: ActiveJob) -> None:
        try:
            await self.complete(job)
        except EncodeStopped:  # cancelled or lost meanwhile: it ends as such, its draft goes
            await discard_draft(self.queue, job)
            await self.drop(job)
        except StoreError as exc:
            now = time.monotonic()
            job.store_failing_since = job.store_failing_since or now
            give_up_s = self.settings.store.audio_store_timeout_s
            if now - job.store_failing_since < give_up_s:
                log.warning(
                    "worker %s: the audio store refused %s (%s); will retry",
                    *(self.name, job.job_id, exc),
                    extra={"job_id": job.job_id},
                )
                await asyncio.sleep(min(1.0, give_up_s / 10))  # the job stays in hand meanwhile
                return
            await discard_draft(self.queue, job)
            await self.give_up(
                job, f"the audio store could not take the audio for {give_up_s:g} s: {exc}"
            )
        except RedisError as exc:
            log.warning(
                "worker %s: storing %s failed (%s); will retry",
                *(self.name, job.job_id, exc),
                extra={"job_id": job.job_id},
            )
            self.metrics.redis_error()
        except Exception as exc:  # encoding failed: no retry can fix it
            log.exception(
                "worker %s: completing %s failed",
                *(self.name, job.job_id),
                extra={"job_id": job.job_id},
            )
            await discard_draft(self.queue, job)
            await self.give_up(job, f"encoding the audio failed: {exc}")

    async def segment_done(
        self, job: ActiveJob, segment: Segment, samples: np.ndarray, verdict: Verdict | None = None
    ) -> None:
        """Store a finished segment (every segment but a one-segment job's only one): its audio,
        its cue (with its verdict), a progress event. A document's goes as a part and leaves the
        worker's memory."""
        total = len(job.segments)
        rate = self.engine.sample_rate
        check = verdict.public() if verdict is not None else None
        if verdict is not None and verdict.state == "failed":
            job.cache_digest = None  # a result with a segment that failed is not kept for others
        cue, added = job.place(segment.index, samples.size, rate, segment.words, check)
        if total == 1 and not job.document:
            return  # its final file is its only segment: the terminal event says it all
        await self.chunks.segment_out(job.job_id, segment.index)  # a streaming job: chunks first
        if job.document:
            pause = np.zeros(added - samples.size, np.float32)
            encoded = audio.encode(np.concatenate([pause, samples]), rate, "pcm")
            job.audio[segment.index] = _STORED  # its samples live in Redis from now on
        else:
            fmt = job.started.request.format
            encoded = await asyncio.to_thread(self.codecs.encode, samples, rate, fmt)
        stored = self.queue.stored
        if stored.store is not None:  # the piece in the store, its key in Redis's list
            kind = "parts" if job.document else "segments"
            ext = "pcm" if job.document else CATALOG[job.started.request.format].extension
            key = await self._put_piece(job, kind, ext, encoded)
            if key is None:
                return
            encoded = key
        done = SegmentDone(
            index=segment.index + 1,
            total=total,
            audio=encoded,
            duration_s=samples.size / rate,
            samples=added,
            sample_rate=rate,
            cue=cue,
            eta=job.eta(),
            document=job.document,
        )
        answer = await self._progress(job, done)
        if answer != "lost":
            self.metrics.segment_stored(job, segment.index)
        if answer == "cancel":
            job.stop()
        elif answer == "lost":
            job.lose()
        elif answer == "yield":
            job.hand_back()

    async def give_up(self, job: ActiveJob, reason: str) -> None:
        """Fail a running job in hand for good (its later segments are dropped)."""
        job.lose()
        self.in_hand.pop(job.job_id, None)
        self.metrics.outcome("failed")
        with contextlib.suppress(RedisError):
            await self._finish(job.job_id, job.started, "failed", reason)

    async def _finish(self, job_id: str, started: Started, state: str, reason: str) -> None:
        """End the job in Redis as `state` ("failed" or "cancelled"), saying why."""
        await self.queue.work.finish(
            job_id, started.client, started.token, state, reason, stream=started.stream
        )

    async def _release(self, job: ActiveJob, reason: str, count_attempt: bool = False) -> bool:
        """Give the job back to the queue (`reason` "": a document's slice ended)."""
        started = job.started
        return await self.queue.work.release(
            job.job_id, started.client, started.token, reason, count_attempt, stream=started.stream
        )

    async def _put_piece(self, job: ActiveJob, kind: str, ext: str, data: bytes) -> bytes | None:
        """A segment or part written to the store, retried for CHATTTS_AUDIO_STORE_TIMEOUT_S
        (the job in hand, its lease renewed); past that the job fails (None)."""
        timeout_s = self.settings.store.audio_store_timeout_s
        give_up = time.monotonic() + timeout_s
        while True:
            try:
                return await self.queue.stored.put_piece(kind, job.job_id, ext, data)
            except StoreError as exc:
                if time.monotonic() >= give_up:
                    reason = f"the audio store could not take the audio for {timeout_s:g} s: {exc}"
                    await self.give_up(job, reason)
                    return None
                log.warning(
                    "worker %s: the audio store refused a segment of %s (%s); will retry",
                    *(self.name, job.job_id, exc),
                    extra={"job_id": job.job_id},
                )
                await asyncio.sleep(min(1.0, self.settings.store.audio_store_timeout_s / 10))

    async def _progress(self, job: ActiveJob, done: SegmentDone) -> str:
        """`Queue.progress`, retried through a short Redis outage: segments are stored in order,
        so one left out would lose every later one (the script takes a repeat of the last). A
        Redis at its maxmemory is waited out for a lease's length (the web tier makes room:
        core/queue/retention.py); past that, this job stops, not the worker."""
        delay, full_since = PROGRESS_RETRY_S, None
        while True:
            try:
                return await self.queue.work.progress(
                    job.job_id, job.started.client, job.started.token, done
                )
            except REDIS_UNAVAILABLE as exc:
                if isinstance(exc, ResponseError):  # Redis at its maxmemory
                    now = time.monotonic()
                    if full_since is None:
                        full_since = now
                        self.metrics.redis_error()
                        log.warning(
                            "worker %s: Redis refused a segment of %s (%s); waiting for room",
                            *(self.name, job.job_id, exc),
                            extra={"job_id": job.job_id},
                        )
                    if now - full_since > self.settings.worker.lease_ms / 1000:
                        await self.give_up(job, f"Redis refused the job's audio: {exc}")
                        return "lost"
                elif delay > PROGRESS_RETRY_MAX_S:
                    raise
                await asyncio.sleep(min(delay, PROGRESS_RETRY_MAX_S))
                delay *= 2

    async def complete(self, job: ActiveJob) -> None:
        if job.dropped:
            await self.drop(job)
            return
        rate = self.engine.sample_rate
        # A streaming job's chunks go out first: its listeners read up to the final chunk count.
        await self.chunks.drained(job.job_id)
        # The job stays in hand (its lease renewed) until the result is stored; if Redis fails
        # meanwhile, the next batch round tries again.
        size = None
        if job.document:  # its parts are its audio, encoded (but to wav or pcm) into pieces
            data, duration_s = b"", job.samples_done / rate
            size = await document_file(self.queue, job, self.engine.sample_rate, self.name)
        else:
            data, duration_s = await asyncio.to_thread(
                render, job.audio, rate, job.started.request.format, self.codecs
            )
        # With an audio store, the file is written there first and the completion records its
        # key: a job is succeeded only once its bytes are durable. A crash between the two
        # leaves an object nothing records, which the sweeper removes.
        stored, audio_ref, cache_ref = self.queue.stored, None, None
        if stored.store is not None and not job.document:
            ext = CATALOG[job.started.request.format].extension
            audio_ref = await stored.put_file(job.job_id, ext, data)
            size = len(data)
            if job.cache_digest:
                cache_ref = await stored.copy_for("cache", job.cache_digest, audio_ref)
        ok = await self.queue.work.complete(
            job.job_id,
            job.started.client,
            job.started.token,
            b"" if audio_ref else data,
            duration_s,
            rate,
            stream=job.started.stream,
            cache_digest=job.cache_digest,
            document_size=size,
            new_cues=job.cues if len(job.segments) == 1 and not job.document else None,
            all_cues=job.cues,
            audio_ref=audio_ref,
            cache_ref=cache_ref,
        )
        # Fenced: the job's new owner writes its own. (Not after a RedisError: the script may have
        # run, its answer lost; an object nothing records is the sweeper's.)
        if not ok:
            await stored.discard(audio_ref, cache_ref)
            await discard_draft(
                self.queue, job
            )  # a document's file, if encoded, is a stale attempt's
        self.in_hand.pop(job.job_id, None)
        if ok:
            self.metrics.succeeded(job, duration_s)
            log.info(
                "worker %s: job %s succeeded: %.2f s of audio in %d segments",
                *(self.name, job.job_id, duration_s, len(job.segments)),
                extra={"job_id": job.job_id},
            )
        else:
            self.metrics.completion_refused()
            log.warning(
                "worker %s: completion of %s refused (reclaimed by another worker)",
                self.name,
                job.job_id,
                extra={"job_id": job.job_id},
            )

    async def drop(self, job: ActiveJob) -> None:
        """Stop a job that was cancelled (finish it as such) or lost (leave it to its new owner)."""
        self.in_hand.pop(job.job_id, None)
        outcome = "failed" if job.failure else "cancelled"
        if job.hold is Hold.STOPPING:
            reason = job.failure or "cancelled by the client"
            await self._finish(job.job_id, job.started, outcome, reason)
        # Counted once Redis took it: a failed finish leaves the job to be reclaimed, and the
        # worker that finishes it counts it.
        self.metrics.outcome("lost" if job.hold is Hold.LOST else outcome)

    async def hand_back(self, job: ActiveJob) -> None:
        """A document whose slice ended goes back to the queue (the attempt not counted) and
        resumes after its stored parts wherever it is taken next."""
        self.in_hand.pop(job.job_id, None)
        ok = await self._release(job, "")
        self.metrics.outcome("yielded" if ok else "lost")

    async def engine_failed(self, job: ActiveJob, exc: EngineError) -> None:
        """A segment of the job failed: it is requeued (the attempt counted) when another
        attempt could succeed, else it fails."""
        await asyncio.sleep(self.settings.worker.retry_backoff_ms / 1000)
        self.in_hand.pop(job.job_id, None)
        if exc.retryable:
            log.warning(
                "worker %s: job %s hit a transient error, requeued: %s",
                *(self.name, job.job_id, exc),
                extra={"job_id": job.job_id},
            )
            await self._release(job, str(exc), count_attempt=True)
            self.metrics.outcome("released")  # counted once Redis took it (else: reclaimed)
        else:
            await self.fail(job.job_id, job.started, str(exc))

    async def release_all(self, reason: str, keep: Collection[str] = ()) -> None:
        """Give every job in hand but `keep` back to the queue; with Redis down, their leases
        will lapse."""
        going = [job for job in self.in_hand.values() if job.job_id not in keep]
        if going:
            log.info(
                "worker %s: handing %d jobs back to the queue (%s): %s",
                self.name,
                len(going),
                reason,
                ", ".join(job.job_id for job in going),
            )
        try:
            for job in going:
                await self._release(job, reason)
                self.metrics.outcome("released")
        except RedisError as exc:
            self.metrics.redis_error()
            log.warning(
                "worker %s: could not release jobs (%s); their leases will expire", self.name, exc
            )
        for job in going:
            self.in_hand.pop(job.job_id, None)
