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

from core.infra.logs import job_log
from workers.chunks import ChunkPublisher
from workers.engines import Engine, EngineError
from workers.engines.base import Segment, SegmentResult
from workers.jobs import ActiveJob, Hold
from workers.metrics import WorkerMetrics
from workers.outcomes import Outcomes

log = logging.getLogger("chattts_online.worker")
# How long a round waits for a finished segment before it reads the queue again: new jobs join
# within this, plus the engine's few steps.
RESULT_WAIT_S = 0.05


class Continuous:
    def __init__(
        self,
        engine: Engine,
        in_hand: dict[str, ActiveJob],
        outcomes: Outcomes,
        chunks: ChunkPublisher,
        metrics: WorkerMetrics,
        one_row_per_stream: bool = False,
    ) -> None:
        """`one_row_per_stream`: a streamed job has one segment in the engine at a time (so
        that the streams the engine admits by capacity are its rows: CHATTTS_STREAM_ADMISSION);
        its next segment goes first when it ends (the engine orders streams by their margin)."""
        self.engine = engine
        self.one_row_per_stream = one_row_per_stream
        self.in_hand = in_hand
        self.outcomes, self.chunks, self.metrics = outcomes, chunks, metrics
        self.in_flight: dict[tuple[str, int], Segment] = {}
        self._results: asyncio.Queue[tuple[Segment, SegmentResult]] = asyncio.Queue()
        self._stop = threading.Event()
        self._serving: asyncio.Future[None] | None = None
        # A busy period (the engine never idle) counts as one batch in the stats; its time is
        # shared, as it passes, among the segments in flight.
        self._period: list[tuple[ActiveJob, Segment]] = []
        self._tick = time.perf_counter()

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
        storing = self.outcomes.storing
        jobs = [
            j for j in self.in_hand.values() if j.hold is Hold.RUNNING and j.job_id not in storing
        ]
        jobs.sort(key=lambda j: j.served_s)  # stable: the oldest first on a tie
        if any(j.alone for j in jobs):
            jobs = [next(j for j in jobs if j.alone)]
            if any(key[0] != jobs[0].job_id for key in self.in_flight):
                return  # it waits until the others have left the engine
        loop = asyncio.get_running_loop()
        while len(self.in_flight) < self.capacity:
            fed = False
            for job in jobs:
                if job.submitted >= len(job.segments) or len(self.in_flight) >= self.capacity:
                    continue
                clock = self.chunks.clock(job.job_id)
                if clock is not None and self.one_row_per_stream and self.busy(job.job_id):
                    continue
                segment = job.segment(job.submitted)
                job.submitted += 1
                if clock is not None:
                    clock.segment = segment.index  # what it expects comes from this segment
                if not self.in_flight:
                    self._tick = time.perf_counter()  # the engine was idle until now
                self.in_flight[(job.job_id, segment.index)] = segment
                self._period.append((job, segment))
                sink = self.chunks.from_engine if clock is not None else None
                self.engine.submit(segment, sink, self._on_done(loop), clock)
                fed = True
            if not fed:
                return

    def _on_done(self, loop: asyncio.AbstractEventLoop) -> Callable[[Segment, SegmentResult], None]:
        put = self._results.put_nowait

        def done(segment: Segment, result: SegmentResult) -> None:  # in the engine thread
            loop.call_soon_threadsafe(put, (segment, result))

        return done

    def busy(self, job_id: str) -> bool:
        """Rows of the job are in the engine."""
        return any(key[0] == job_id for key in self.in_flight)

    def cancel_dropped(self) -> None:
        """Rows of jobs that were cancelled or lost stop at the runtime's next look (those of a
        job handed back run to their end: no new ones are fed, see `feed`)."""
        for (job_id, _), segment in list(self.in_flight.items()):
            job = self.in_hand.get(job_id)
            if job is None or job.dropped:
                self.engine.cancel(segment)

    async def collect(self) -> None:
        """Take the segments that finished (waiting a little for the first), in order per job.
        With nothing in the engine, it waits for a result being stored instead (it frees a
        place in the hand), and not at all when there is none."""
        first = None
        if not self.in_flight and self._results.empty():
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
        for job_id, _ in self.in_flight:
            job = self.in_hand.get(job_id)
            if job is not None:
                job.engine_s += elapsed / len(self.in_flight)
                job.served_s += elapsed / len(self.in_flight)

    async def _handle(self, segment: Segment, result: SegmentResult) -> None:
        self.in_flight.pop((segment.job_id, segment.index), None)
        job = self.in_hand.get(segment.job_id)
        storing = job is not None and job.job_id in self.outcomes.storing
        if job is None or job.hold is Hold.LOST or storing or result.error == "cancelled":
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
                extra=job_log(job.job_id),
            )
            self.chunks.close(job.job_id)
            await self.outcomes.engine_failed(job, EngineError(result.error, result.retryable))
            return
        job.finished[segment.index] = (segment, result.audio)
        while len(job.audio) in job.finished:  # in order: the job's next segment is back
            # (the segment the engine made: where it reports them, its words' times are on it)
            done, samples = job.finished.pop(len(job.audio))
            job.audio.append(samples)
            await self.outcomes.segment_done(job, done, samples)
        if job.done and job.job_id not in self.outcomes.storing and not job.dropped:
            self.outcomes.complete_in_background(job)
