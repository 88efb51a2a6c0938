"""Taking jobs from the queue: fresh deliveries and reclaimed entries, started (fenced), split
into segments, answered from the cache when they can be, or put in the worker's hand."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
import orjson

from core.queue.cache import cache_digest
from core.queue.job import SynthesisRequest
from core.queue.results import Started
from core.queue.speakers import unspeakable
from core.queue.voice_names import is_derived, voice_runs
from workers.cache_hits import answer_from_cache
from workers.chunks import ChunkPublisher
from workers.context import WorkerContext
from workers.engines import EngineError
from workers.engines.base import Pieces
from workers.jobs import ActiveJob
from workers.outcomes import Outcomes
from workers.streams import StreamRoom

log = logging.getLogger("chattts_online.worker")


class Intake:
    def __init__(
        self,
        ctx: WorkerContext,
        outcomes: Outcomes,
        chunks: ChunkPublisher,
        in_engine: Callable[..., Awaitable[Any]],
    ) -> None:
        self.name, self.settings, self.queue = ctx.name, ctx.settings, ctx.queue
        self.engine, self.in_hand, self.metrics = ctx.engine, ctx.in_hand, ctx.metrics
        self.reclaimer = ctx.queue.work.reclaimer(ctx.name)
        self.outcomes, self.chunks = outcomes, chunks
        self.in_engine = in_engine
        self.streams = StreamRoom(
            ctx.name, ctx.settings, ctx.engine, chunks, ctx.metrics, self.hand()
        )
        self._reclaim_again = False
        self._last_reclaim = 0.0

    def hand(self) -> int:
        """The most jobs in hand: twice a batch, so that the next batch's jobs are started (and
        the engine kept busy) while the previous ones are encoded and stored in the background."""
        return 2 * max(1, self.engine.max_batch)

    def capacity(self) -> int:
        # A job that runs alone (a previous attempt never finished: it may crash its worker)
        # has the worker to itself, so that no innocent job is charged an attempt with it.
        if any(job.alone for job in self.in_hand.values()):
            return 0
        return self.hand() - len(self.in_hand)

    def bulk_room(self) -> int:
        """Bulk jobs the worker may still take: as many as the engine runs at once, so that the
        rest of its hand is kept for interactive work (which then goes next: continuous.py)."""
        bulk = sum(1 for job in self.in_hand.values() if job.started.bulk)
        return max(0, max(1, self.engine.max_batch) - bulk)

    async def fill(self) -> None:
        """Take new jobs while there is room: reclaimed ones first, then the scheduler's
        (lua/take.lua: stream entries, then the fair waiting room).

        Takes go on while they bring work and the batch window is open; jobs answered from the
        cache never enter the hand, so the reclaim check runs on every round, not once.
        """
        reclaim_every_s = self.settings.worker.reclaim_interval_ms / 1000
        window_ends: float | None = None
        woken = False
        while self.capacity() > 0:
            now = time.monotonic()
            if self._reclaim_again or now - self._last_reclaim >= reclaim_every_s:
                self._last_reclaim = now
                await self._reclaim()
                if self.capacity() <= 0:
                    return
            pending = sum(len(j.segments) - len(j.audio) for j in self.in_hand.values())
            block_ms: int | None
            if pending == 0:  # idle: block for work
                block_ms = min(
                    self.settings.worker.block_ms, self.settings.worker.reclaim_interval_ms
                )
            elif self.engine.max_batch <= 1 or pending >= self.engine.max_batch:
                block_ms = None  # a full batch is waiting: only take what is already there
            else:  # a partial batch: wait for batch-mates until the window closes
                window_ends = (
                    window_ends or time.monotonic() + self.settings.engine.batch_wait_ms / 1000
                )
                remaining_ms = int((window_ends - time.monotonic()) * 1000)
                block_ms = remaining_ms if remaining_ms >= 1 else None
            taken = await self.queue.work.take(
                self.name, self.capacity(), self.bulk_room(), self.streams.room()
            )
            for stream, entry, job_id, client in taken:
                await self._take(stream, entry, job_id, client)
            if block_ms is None or (woken and not taken):
                return  # (woken for work that was not this worker's: back to its rounds)
            # Nothing came: wait on the wake list (pushed by every enqueue and release); the
            # worker's Redis client allows blocks of block_ms (process.py).
            woken = False
            if not taken:
                if not await self.queue.work.wait_for_work(block_ms / 1000):
                    return
                woken = True

    async def _reclaim(self) -> None:
        """Take over an entry whose lease expired (its worker died or hung).

        One at a time, run alone: it may be what killed its worker. While reclaims find work,
        the next sweep follows at once instead of after the reclaim interval.
        """
        claimed = await self.reclaimer.sweep(1)
        self._reclaim_again = bool(claimed)
        for stream, entry, fields in claimed:
            log.info("worker %s: reclaimed entry %s", self.name, entry)
            client = fields[b"client"].decode() if b"client" in fields else None
            await self._take(stream, entry, fields[b"id"].decode(), client)

    async def _take(self, stream: str, entry: str, job_id: str, client: str | None) -> None:
        started = await self.queue.work.start(job_id, entry, self.name, stream, client or None)
        if not isinstance(started, Started):
            self.metrics.start_refused(started)
            log.info(
                "worker %s: skipped job %s (%s)",
                *(self.name, job_id, started),
                extra={"job_id": job_id},
            )
            return
        self.metrics.started(started.queued_at)
        request = started.request
        voice_data = language = None
        if not is_derived(request.voice):
            voice_data, language = await self._voice_data(request.voice)
            if voice_data is None:
                reason = f"voice {request.voice!r} is not registered (any more)"
                await self.outcomes.fail(job_id, started, reason)
                return
        capabilities = self.engine.capabilities
        refusal = unspeakable(
            request.voice,
            self.engine.name,
            registered_voices=capabilities.registered_voices,
            blends=capabilities.blends,
            who="this worker runs",
        )
        if refusal is not None:  # never another voice instead
            await self.outcomes.fail(job_id, started, refusal.message)
            return
        try:
            pieces, requests = await self._pieces(request, language)
        except EngineError as exc:
            await self.outcomes.fail(job_id, started, str(exc))
            return
        segments = [segment for segment, _, _ in pieces]
        digest = (
            None
            if started.document
            else cache_digest(
                self.engine.name,
                self.engine.model_version,
                request,
                segments,
                voice_data,
                self.engine.capabilities.deterministic,
                started.client if self.settings.limits.cache_scope == "client" else "",
            )
        )
        job = ActiveJob(job_id, entry, started, segments, voice_data, digest)
        job.spans = [(start, end) for _, start, end in pieces]
        job.requests = requests
        job.alone = started.suspect  # its last run never ended cleanly: it may crash its worker
        if started.document and started.segments_done:
            # A document resumes after its last stored segment: those are not made again.
            job.audio = [np.zeros(0, np.float32)] * min(started.segments_done, len(segments))
            job.samples_done = started.samples_done
            job.submitted = len(job.audio)  # the rest are handed to the engine
            log.info(
                "worker %s: job %s resumes after segment %d of %d",
                *(self.name, job_id, len(job.audio), len(segments)),
                extra={"job_id": job_id},
            )
        if digest and await answer_from_cache(self.queue, self.metrics, self.name, job, digest):
            return
        if not segments:
            await self.outcomes.fail(job_id, started, "the text has nothing this engine can speak")
            return
        # The hand's fair clock: a job joins at the least-served one's engine time, so that it
        # goes next after that one (continuous.py), and no job in hand is passed over for long.
        others = [j.served_s for j in self.in_hand.values() if not j.done]
        job.served_s = min(others, default=0.0)
        self.in_hand[job_id] = job
        self.chunks.open(job)

    async def _pieces(
        self, request: SynthesisRequest, language: str | None
    ) -> tuple[Pieces, list[SynthesisRequest]]:
        """The engine's segments of the text, and the request each is made with: a voice per
        language reads each run of sentences in its language's voice, the rest the job's."""
        pieces: Pieces = []
        requests: list[SynthesisRequest] = []
        for voice, start, end in voice_runs(request.voice, request.text):
            run = request if voice == request.voice else request.model_copy(update={"voice": voice})
            found = await self.in_engine(self.engine.pieces, request.text[start:end], run, language)
            pieces += [(text, a + start, b + start) for text, a, b in found]
            requests += [run] * len(found)
        return pieces, requests

    async def _voice_data(self, name: str) -> tuple[str | None, str | None]:
        """A registered voice's data and language tag (None, None: not registered). Voices
        registered before data and metadata were kept apart carry their data in the metadata."""
        raw, data = await self.queue.voices.data(name)
        if raw is None:
            return None, None
        stored = orjson.loads(raw)
        embedding = data.decode() if data is not None else stored.get("embedding")
        return embedding, stored.get("language")
