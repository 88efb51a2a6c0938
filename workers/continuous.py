"""The worker's side of the engine boundary: the segments of the jobs in hand are handed to the
engine as room frees up, the least-served job first, and come back one by one, in any order.

A job that arrives while others run joins them at once (between two steps of an engine that
batches continuously), instead of waiting for a batch to end; a segment that fails fails its own
job only. Segments of one job may run side by side; their results are put back in order before
their `progress` events and the final file.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass

import numpy as np
from redis.exceptions import RedisError

from core.audio.sizes import speech_seconds
from workers.checks.verdict import Verdict
from workers.chunks import ChunkPublisher
from workers.engines import Engine, EngineError
from workers.engines.base import ChunkSink, PlaybackClock, Segment, SegmentResult
from workers.hearing import Hearing
from workers.jobs import ActiveJob, Hold
from workers.metrics import WorkerMetrics
from workers.outcomes import Outcomes

log = logging.getLogger("chattts_online.worker")
# How long a round waits for a finished segment before it reads the queue again: new jobs join
# within this, plus the engine's few steps.
RESULT_WAIT_S = 0.05
# Segments of one job made and not yet kept (in the engine, being heard, made again) at most:
# a job's audio waiting for its checks stays bounded, and a document still yields its worker.
HEARD_AHEAD = 3
_CAUSES_KEPT = 64  # distinct causes of broken checks logged in full; past them, none


@dataclass(frozen=True)
class Heard:
    """An attempt of a segment was heard (its audio and verdict are on its job's `tries`)."""

    verdict: Verdict


class Continuous:
    def __init__(
        self,
        engine: Engine,
        in_hand: dict[str, ActiveJob],
        outcomes: Outcomes,
        chunks: ChunkPublisher,
        metrics: WorkerMetrics,
        one_row_per_stream: bool = False,
        hearing: Hearing | None = None,
    ) -> None:
        """`one_row_per_stream`: a streamed job has one segment in the engine at a time (so
        that the streams the engine admits by capacity are its rows: CHATTTS_STREAM_ADMISSION);
        its next segment goes first when it ends (the engine orders streams by their margin).
        `hearing`: each segment is heard before it counts, and made again while it fails."""
        self.engine = engine
        self.one_row_per_stream = one_row_per_stream
        self.hearing = hearing
        self.in_hand = in_hand
        self.outcomes, self.chunks, self.metrics = outcomes, chunks, metrics
        # (job, segment, attempt) -> the attempt in the engine; those being heard.
        self.in_flight: dict[tuple[str, int, int], Segment] = {}
        self.hearings: dict[tuple[str, int, int], asyncio.Task[None]] = {}
        self._results: asyncio.Queue[tuple[Segment, SegmentResult | Heard]] = asyncio.Queue()
        self._stop = threading.Event()
        self._serving: asyncio.Future[None] | None = None
        # A busy period (the engine never idle) counts as one batch in the stats; its time is
        # shared, as it passes, among the segments in flight.
        self._period: list[tuple[ActiveJob, Segment]] = []
        self._tick = time.perf_counter()
        # The causes of broken checks already logged (with their traceback): each once, not
        # once a segment (a document would log megabytes of the same traceback).
        self._check_failures: set[str] = set()

    def start(self, executor: Executor) -> None:
        loop = asyncio.get_running_loop()
        self._serving = loop.run_in_executor(executor, self.engine.serve, self._stop)

    async def stop(self, timeout_s: float) -> bool:
        """Stop serving; False when the engine thread did not come back in time."""
        self._stop.set()
        if self._serving is None:
            return True
        done, _ = await asyncio.wait({self._serving}, timeout=timeout_s)
        return bool(done)

    @property
    def capacity(self) -> int:
        """Segments to keep handed over: those the engine makes at once, and those it keeps
        waiting to fill a free row."""
        return max(1, int(self.engine.max_batch)) + max(0, int(self.engine.waiting_room))

    def feed(self) -> None:
        """Hand over the next segments of the jobs in hand, a segment per job per pass, while
        there is room: the least-served job first on the hand's fair clock (the oldest on a
        tie), so that a short job taken while a long one runs goes after that one's next
        segment, not after all of it. A job that runs alone has the engine to itself."""
        jobs = self._feedable()
        loop = asyncio.get_running_loop()
        while len(self.in_flight) < self.capacity:
            fed = False
            for job in jobs:
                if len(self.in_flight) >= self.capacity:
                    break
                fed = self._hand_over_next(job, loop) or fed
            if not fed:
                return

    def _feedable(self) -> list[ActiveJob]:
        """The running jobs in hand, least served first; the one that runs alone by itself,
        and none while others are still in the engine beside it."""
        storing = self.outcomes.storing
        jobs = [
            j for j in self.in_hand.values() if j.hold is Hold.RUNNING and j.job_id not in storing
        ]
        jobs.sort(key=lambda j: j.served_s)  # stable: the oldest first on a tie
        alone = next((j for j in jobs if j.alone), None)
        if alone is None:
            return jobs
        if any(key[0] != alone.job_id for key in self.in_flight):
            return []  # it waits until the others have left the engine
        return [alone]

    def _hand_over_next(self, job: ActiveJob, loop: asyncio.AbstractEventLoop) -> bool:
        """Hand the job's next segment to the engine, unless it has none left, its segments
        wait to be heard, or its stream already has a row playing. Whether it did."""
        if job.submitted >= len(job.segments):
            return False
        if len(job.tries) >= HEARD_AHEAD:
            return False  # its segments wait to be heard: the engine serves others meanwhile
        clock = self.chunks.clock(job.job_id)
        if self.hearing is not None and self.hearing.holds(job):
            clock = None  # it goes out whole once heard: made as any other segment
        if clock is not None and self.one_row_per_stream and self._playing(job.job_id):
            return False
        segment = job.segment(job.submitted)
        job.submitted += 1
        if clock is not None:
            clock.segment = segment.index  # what it expects comes from this segment
        attempts = [segment]
        if self.hearing is not None:
            attempts = self.hearing.first(job, segment, streamed=clock is not None)
        sink = self.chunks.from_engine if clock is not None else None
        for attempt in attempts:  # a stream plays its first; other candidates are quiet
            self._submit(job, attempt, sink, clock, loop)
            sink = None
        return True

    def _submit(
        self,
        job: ActiveJob,
        segment: Segment,
        sink: ChunkSink | None,
        clock: PlaybackClock | None,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        if not self.in_flight:
            self._tick = time.perf_counter()  # the engine was idle until now
        self.in_flight[(job.job_id, segment.index, segment.attempt)] = segment
        self._period.append((job, segment))
        self.engine.submit(segment, sink, self._on_done(loop), clock)

    def _on_done(self, loop: asyncio.AbstractEventLoop) -> Callable[[Segment, SegmentResult], None]:
        put = self._results.put_nowait

        def done(segment: Segment, result: SegmentResult) -> None:  # in the engine thread
            loop.call_soon_threadsafe(put, (segment, result))

        return done

    def busy(self, job_id: str) -> bool:
        """Rows of the job are in the engine, or being heard."""
        return any(key[0] == job_id for key in (*self.in_flight, *self.hearings))

    def _playing(self, job_id: str) -> bool:
        """A streamed job's row is in the engine (its remakes do not hold up its next one)."""
        return any(key[0] == job_id and key[2] == 0 for key in self.in_flight)

    def cancel_dropped(self) -> None:
        """Rows of jobs that were cancelled or lost stop at the runtime's next look (those of a
        job handed back run to their end: no new ones are fed, see `feed`)."""
        for (job_id, _, _), segment in list(self.in_flight.items()):
            job = self.in_hand.get(job_id)
            if job is None or job.dropped:
                self.engine.cancel(segment)

    async def collect(self) -> None:
        """Take the segments that finished (waiting a little for the first), in order per job.
        With nothing in the engine, it waits for a result being stored instead (it frees a
        place in the hand), and not at all when there is none."""
        first = None
        if not self.in_flight and not self.hearings and self._results.empty():
            if self.outcomes.completions:
                await asyncio.wait(self.outcomes.completions, timeout=RESULT_WAIT_S)
            self._account()
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(RESULT_WAIT_S):  # the wait only: handling is not cut short
                first = await self._results.get()
        self._account()
        if first is not None:
            await self._handle(*first)
        while not self._results.empty():
            await self._handle(*self._results.get_nowait())
        if not self.in_flight and self._period:
            self.metrics.observe_rows(self._period)
            self._period = []

    def _account(self) -> None:
        """The engine time since the last look, shared among the segments in flight."""
        now = time.perf_counter()
        elapsed, self._tick = now - self._tick, now
        if not self.in_flight:
            return
        self.metrics.busy(elapsed)
        for job_id, _, _ in self.in_flight:
            job = self.in_hand.get(job_id)
            if job is not None:
                job.engine_s += elapsed / len(self.in_flight)
                job.served_s += elapsed / len(self.in_flight)

    async def _handle(self, segment: Segment, result: SegmentResult | Heard) -> None:
        key = (segment.job_id, segment.index, segment.attempt)
        if isinstance(result, Heard):
            self.hearings.pop(key, None)
        else:
            self.in_flight.pop(key, None)
            if result.error is None:  # what the engine made in the time it was busy
                self.metrics.made(result.audio.size / self.engine.sample_rate)
        job = self.in_hand.get(segment.job_id)
        storing = job is not None and job.job_id in self.outcomes.storing
        if job is None or job.hold is Hold.LOST or storing:
            return
        if isinstance(result, Heard):
            await self._heard(job, segment)
            return
        if result.error == "cancelled":
            return
        if result.error is not None:
            for key, other in list(self.in_flight.items()):
                if key[0] == job.job_id:
                    self.engine.cancel(other)
            log.warning(
                "job %s segment %d failed: %s",
                job.job_id,
                segment.index,
                result.error,
                extra={"job_id": job.job_id},
            )
            self.chunks.close(job.job_id)
            await self.outcomes.engine_failed(job, EngineError(result.error, result.retryable))
            return
        if self.hearing is None:
            await self._keep(job, segment, result.audio, None)
            return
        if job.dropped:
            return
        task = asyncio.create_task(self._hear(job, segment, result), name=f"hear-{key}")
        self.hearings[key] = task

    async def _hear(self, job: ActiveJob, segment: Segment, result: SegmentResult) -> None:
        assert self.hearing is not None
        try:
            verdict = await self.hearing.hear(job, segment, result)
        except Exception as exc:  # a check that broke is a segment unheard, never a stuck job
            cause = f"{type(exc).__name__}: {exc}"[:300]
            if cause not in self._check_failures and len(self._check_failures) < _CAUSES_KEPT:
                self._check_failures.add(cause)
                log.exception(
                    "job %s: checking segment %d failed (logged once for this cause; its "
                    "segments go unheard)",
                    job.job_id,
                    segment.index,
                )
            verdict = self.hearing.unheard(job, segment, result, f"its check failed: {exc}")
        self.metrics.attempt_heard(job, verdict)
        self._results.put_nowait((segment, Heard(verdict)))

    async def _heard(self, job: ActiveJob, segment: Segment) -> None:
        """An attempt was heard: the segment is made again, waits for its other attempts, or
        keeps its best one."""
        assert self.hearing is not None
        if job.dropped or segment.index not in job.tries:
            return
        again = self.hearing.again(job, segment.index)
        if again is not None:
            self.metrics.segment_remade(job)
            self._submit(job, again, None, None, asyncio.get_running_loop())
            await self._charge_remake(job, again)
            return
        settled = self.hearing.settled(job, segment.index)
        if settled is None:
            return
        kept, samples, verdict = settled
        self.metrics.segment_heard(job, verdict)
        if self.hearing.holds(job):  # its stream gets it now, whole
            self.chunks.feed(job.job_id, kept.index, samples, True)
        await self._keep(job, kept, samples, verdict)

    async def _charge_remake(self, job: ActiveJob, segment: Segment) -> None:
        """A segment made again costs its client in the queue's fair share, as a job would."""
        started = job.started
        try:
            await self.outcomes.queue.work.remake(
                job.job_id, started.token, speech_seconds(segment.text)
            )
        except RedisError as exc:  # a charge missed is fairness lost for one segment, no more
            log.warning("job %s: the remade segment's charge failed: %s", job.job_id, exc)

    async def _keep(
        self, job: ActiveJob, segment: Segment, samples: np.ndarray, verdict: Verdict | None
    ) -> None:
        """A segment's audio is the job's: stored in order, the job completed with its last."""
        job.finished[segment.index] = (segment, samples, verdict)
        while len(job.audio) in job.finished:  # in order: the job's next segment is back
            # (the segment the engine made: where it reports them, its words' times are on it)
            done, kept, heard = job.finished.pop(len(job.audio))
            job.audio.append(kept)
            await self.outcomes.segment_done(job, done, kept, heard)
        if job.done and job.job_id not in self.outcomes.storing and not job.dropped:
            self.outcomes.complete_in_background(job)
