"""The worker process: preload the engine, read jobs from the consumer group, hand their segments
to the engine, store what comes back.

One asyncio loop talks to Redis; the engine runs in one dedicated thread (engines are not
thread-safe), serving segments while the loop feeds it (continuous.py); audio encoding runs in the
default executor. Leases are renewed by a side task.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import os
import signal
import socket
import time
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np
from redis.exceptions import RedisError

from core.infra.redis_client import REDIS_UNAVAILABLE, RedisClient, connect
from core.infra.settings import Settings
from core.queue.job import SynthesisRequest
from core.queue.store import Queue
from workers.checks import calibration
from workers.checks.checker import Checker, make_recognizer
from workers.checks.faults import AudioFaults
from workers.chunks import ChunkPublisher
from workers.context import WorkerContext
from workers.continuous import Continuous
from workers.engines import Engine, EngineError, create_engine
from workers.engines.base import Segment
from workers.hearing import Hearing
from workers.intake import Intake
from workers.jobs import ActiveJob, Hold
from workers.leases import renew_leases
from workers.metrics import WorkerMetrics
from workers.outcomes import Outcomes
from workers.stats import WorkerStats, publish_heartbeats
from workers.sweeper import sweep_audio

log = logging.getLogger("chattts_online.worker")
T = TypeVar("T")

# Back-off while Redis is unreachable: quick first retry, never a busy loop, capped.
BACKOFF_START_S, BACKOFF_MAX_S = 0.1, 5.0
# How long a cancelled side task may take to end before it is cancelled again.
CANCEL_AGAIN_S = 0.5
# Job ids a heartbeat names as held (the console shows who holds which job); a full hand of a
# large batch is counted, not listed.
HOLDING_LISTED = 64


class Worker:
    def __init__(self, settings: Settings, engine: Engine | None = None) -> None:
        self.settings = settings
        self.name = settings.worker.worker_name
        self.engine: Engine = engine or create_engine(settings)
        self.stats = WorkerStats()
        self.in_hand: dict[str, ActiveJob] = {}
        self.metrics = WorkerMetrics(self.in_hand)
        self._engine_thread = ThreadPoolExecutor(1, thread_name_prefix="engine")
        self._stopping = asyncio.Event()
        self._grace_deadline = float("inf")
        self._signalled = False  # a stop signal came (a drain is not one)
        self.engine_stuck = False
        # Set while the engine thread runs the engine's serving loop.
        self._serving: Engine | None = None
        self.redis: RedisClient | None = None
        self.queue: Queue | None = None
        self.intake: Intake
        self.outcomes: Outcomes
        self.chunks: ChunkPublisher

    # -- lifecycle --------------------------------------------------------------------------

    async def in_engine(self, fn: Any, *args: Any) -> Any:
        if self._serving is not None:  # the engine thread runs its loop: calls go between steps
            return await asyncio.wrap_future(self._serving.call(functools.partial(fn, *args)))
        return await asyncio.get_running_loop().run_in_executor(self._engine_thread, fn, *args)

    def request_stop(self) -> None:
        """The first SIGTERM or SIGINT: finish the jobs in hand within the grace period (a
        document goes back at once: it resumes after its stored parts); the second: hand them
        all back now. (`run` starts its children in process groups of their own: a terminal's
        Ctrl-C reaches them once, as `run` passes it on.)"""
        if self._signalled and self._grace_deadline > time.monotonic():
            log.info("worker %s: asked again: handing its jobs back now", self.name)
            self._grace_deadline = 0.0
        self._signalled = True
        self._stop()

    def _stop(self) -> None:
        """Stop taking jobs; finish those in hand within the grace period."""
        if self._stopping.is_set():
            return
        self._grace_deadline = time.monotonic() + self.settings.worker.shutdown_grace_s
        self.metrics.ready.set(0)
        log.info(
            "worker %s: stopping: finishing %d jobs in hand (up to %.0f s; documents go back to "
            "the queue and resume where they stopped)",
            self.name,
            len(self.in_hand),
            self.settings.worker.shutdown_grace_s,
        )
        self._stopping.set()

    def drain(self, operator: str) -> None:
        """An operator asked this worker to drain (the console): it stops as on SIGTERM,
        finishing or handing back what it holds, and exits 0."""
        if not self._stopping.is_set():
            log.info("worker %s: draining, as operator %s asked", self.name, operator)
        self._stop()  # not a signal: a later SIGTERM (the pod ending) still has its grace

    async def run(self) -> None:
        await self.metrics.serve(self.settings.web.host, self.settings.worker.worker_metrics_port)
        try:  # the metrics port is freed however the worker ends (a failed load included)
            await self._run()
        finally:
            await self.metrics.close()
        log.info("worker %s: stopped", self.name)

    async def _run(self) -> None:
        t0 = time.perf_counter()
        self.redis = connect(self.settings, block_ms=self.settings.worker.block_ms)
        self.queue = Queue(self.redis, self.settings)
        # While the model loads, the worker says so (operators see it; readiness does not count
        # it); it joins the consumer group only once it can synthesize.
        loading = asyncio.create_task(
            # A drain asked meanwhile stops it once its model is loaded, having taken nothing.
            self._heartbeats(self.queue, self.loading_beat),
            name="heartbeat-loading",
        )
        try:
            await self.in_engine(self.engine.load)
            loaded = time.perf_counter()
            await self.in_engine(self.engine.warmup)
        finally:
            await _cancel_and_wait([loading])
        self.stats.ready_s = time.perf_counter() - t0
        log.info(
            "worker %s: engine %s (%s) loaded in %.2fs, warmed up in %.2fs",
            self.name,
            self.engine.name,
            self.engine.model_version,
            loaded - t0,
            time.perf_counter() - loaded,
        )
        gaps = self.metrics.stream_gaps.inc
        self.chunks = ChunkPublisher(self.queue, self.engine.sample_rate, on_gap=gaps)
        self.chunks.start()
        ctx = WorkerContext(
            self.name, self.settings, self.queue, self.engine, self.in_hand, self.metrics
        )
        self.outcomes = Outcomes(ctx, self.chunks)
        self.intake = Intake(ctx, self.outcomes, self.chunks, self.in_engine)
        await self._until_redis(self.queue.ensure_group)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop)
        side_tasks = [
            asyncio.create_task(self._heartbeats(self.queue, self.heartbeat), name="heartbeat"),
            asyncio.create_task(sweep_audio(self.queue), name="audio-sweeper"),
            asyncio.create_task(
                renew_leases(
                    self.queue, self.in_hand, self.name, self.settings.worker.lease_ms, self.metrics
                ),
                name="leases",
            ),
        ]
        self.metrics.loaded(self.name, self.engine, self.stats.ready_s)
        log.info(
            "worker %s: ready in %.2fs, reading %s",
            self.name,
            self.stats.ready_s,
            self.queue.keys.jobs,
        )
        try:
            await self._serve()
        finally:
            if self.outcomes.completions:
                await asyncio.wait(
                    self.outcomes.completions, timeout=self.settings.worker.shutdown_grace_s
                )
            await self.chunks.stop()
            await _cancel_and_wait(side_tasks)
            with contextlib.suppress(RedisError):
                await self.queue.fleet.leave(self.name)
            await self.redis.aclose()
            self._engine_thread.shutdown(wait=False, cancel_futures=True)
            self.outcomes.codecs.close()

    async def _until_redis(self, fn: Any) -> Any:
        delay = BACKOFF_START_S
        while True:
            try:
                return await fn()
            except REDIS_UNAVAILABLE as exc:
                if self._stopping.is_set():
                    raise
                delay = await self._redis_down(exc, delay)

    async def _redis_down(self, exc: Exception, delay: float) -> float:
        """Wait `delay` out while Redis is unreachable; the next, longer delay."""
        self.metrics.redis_error()
        log.warning("worker %s: Redis unavailable (%s); retrying in %.1fs", self.name, exc, delay)
        await asyncio.sleep(delay)
        return min(delay * 2, BACKOFF_MAX_S)

    # -- main loop --------------------------------------------------------------------------

    async def _serve(self) -> None:
        """The main loop: jobs are read while the engine runs, and their segments join its work
        (see continuous.py)."""
        checker = Checker(make_recognizer(self.settings), self.settings.checks.check_pending)
        await checker.start()
        await self._calibrate(checker)
        checks, faults = self.settings.checks, AudioFaults.from_env()
        if not self.engine.capabilities.speech and faults is None:
            log.info(
                "worker %s: its weights make no speech: segments are not made again", self.name
            )
            checks = dataclasses.replace(checks, check_tries=1)
        hearing = Hearing(checker, checks, self.engine.sample_rate, faults)
        run = Continuous(
            self.engine,
            self.in_hand,
            self.outcomes,
            self.chunks,
            self.metrics,
            one_row_per_stream=self.settings.scheduling.stream_admission == "capacity",
            hearing=hearing,
        )

        async def one_round() -> None:
            await self._tidy(run.busy)
            run.cancel_dropped()
            run.feed()
            await run.collect()

        run.start(self._engine_thread)
        self._serving = self.engine
        try:
            await self._rounds(one_round)
        finally:
            self._serving = None
            self.engine_stuck = not await run.stop(self.settings.worker.shutdown_grace_s)
            await checker.close()

    async def _calibrate(self, checker: Checker) -> None:
        """Which of the engine's own English voices the recognizer hears, found the first time
        each is heard (checks/calibration.py): for an engine whose voices always say the same
        (eSpeak NG) and a recognizer small enough to hear some poorly."""
        engine, recognizer = self.engine, checker.recognizer
        if recognizer is None or not recognizer.calibrated or not engine.capabilities.deterministic:
            return
        if not recognizer.covers("en"):
            return
        voices = await self.in_engine(engine.voices)
        english = {v.name for v in voices if v.language.lower().startswith("en")}
        checker.calibration = calibration.Calibration(
            checker, english, self._say_calibration, engine.sample_rate
        )

    async def _say_calibration(self, voice: str) -> list[np.ndarray]:
        """calibration.SENTENCES in `voice`, made by the engine between the jobs' segments."""
        loop = asyncio.get_running_loop()
        made: list[asyncio.Future[Any]] = []
        for index, text in enumerate(calibration.SENTENCES):
            future: asyncio.Future[Any] = loop.create_future()
            made.append(future)

            def done(_segment: Segment, result: Any, future: asyncio.Future[Any] = future) -> None:
                loop.call_soon_threadsafe(future.set_result, result)  # from the engine thread

            request = SynthesisRequest(text=text, voice=voice)
            self.engine.submit(Segment(f"calibration-{voice}", index, text, request), None, done)
        results = await asyncio.gather(*made)
        failed = [r.error for r in results if r.error is not None]
        if failed:
            raise EngineError(failed[0])
        return [r.audio for r in results]

    async def _rounds(self, one_round: Callable[[], Awaitable[None]]) -> None:
        """Take jobs and run `one_round` until the worker stops: when its hand is empty, or past
        its grace period (jobs in hand go back to the queue). A Redis outage only pauses it."""
        delay = BACKOFF_START_S
        while True:
            if self._stopping.is_set():
                if not self.in_hand:
                    return
                if time.monotonic() > self._grace_deadline:
                    await self.outcomes.release_all("its worker stopped before it was done")
                    return
                if all(job.started.document for job in self.in_hand.values()):
                    # A document whose file is being encoded finishes (within the grace).
                    storing = set(self.outcomes.storing)
                    await self.outcomes.release_all(
                        "stopped; it resumes after its stored parts", keep=storing
                    )
                    if not self.in_hand:
                        return
            try:
                if not self._stopping.is_set():
                    await self.intake.fill()
                await one_round()
                delay = BACKOFF_START_S
            except REDIS_UNAVAILABLE as exc:
                delay = await self._redis_down(exc, delay)

    async def _tidy(self, busy: Callable[[str], bool]) -> None:
        """Between rounds: cancelled and lost jobs leave, documents whose slice ended go back to
        the queue, finished jobs whose result could not be stored are stored again, streams of
        jobs that left are closed. `busy`: a job with segments still in the engine, handed back
        once they are done (their segments stored, not thrown away)."""
        storing = self.outcomes.storing
        for job in [j for j in self.in_hand.values() if j.dropped and j.job_id not in storing]:
            await self.outcomes.drop(job)
        for job in [j for j in self.in_hand.values() if j.hold is Hold.YIELDING and not j.done]:
            if busy(job.job_id):
                continue
            await self.outcomes.hand_back(job)
        for job in [j for j in self.in_hand.values() if j.done and j.job_id not in storing]:
            self.outcomes.complete_in_background(job)
        for job_id in [j for j in self.chunks.streams if j not in self.in_hand]:
            self.chunks.close(job_id)

    # -- side tasks -------------------------------------------------------------------------

    def _heartbeats(
        self, queue: Queue, beat: Callable[[], dict[str, Any]]
    ) -> Coroutine[Any, Any, None]:
        """The heartbeat task's loop: `beat()` published, an operator's drain answered."""
        return publish_heartbeats(
            queue, self.name, self.settings.worker.heartbeat_s, beat, self.metrics, self.drain
        )

    def loading_beat(self) -> dict[str, Any]:
        """The heartbeat of a worker still loading its model: alive, not ready."""
        return {
            "name": self.name,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "state": "loading",
            "engine": self.engine.name,
            "started_at": self.stats.started_at,
            "ts": time.time(),
            "voices": [],
        }

    def heartbeat(self) -> dict[str, Any]:
        beat = self.stats.payload(
            self.name, self.engine, len(self.in_hand), self._stopping.is_set(), self.metrics
        )
        beat["streams"] = self.intake.streams.reading()
        beat["holding"] = list(self.in_hand)[:HOLDING_LISTED]
        return beat


async def _cancel_and_wait(tasks: list[asyncio.Task[Any]]) -> None:
    """Cancel tasks until they end. A cancellation that lands inside redis-py's read of a reply
    can be swallowed, and a loop that swallowed one goes on: it is cancelled again."""
    pending = {t for t in tasks if not t.done()}
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=CANCEL_AGAIN_S)


def main(settings: Settings) -> int:
    """Entry point of `chattts-online worker`."""
    worker = Worker(settings)
    asyncio.run(worker.run())
    if worker.engine_stuck:
        # The engine thread is still inside a batch whose jobs went back to the queue; the
        # interpreter would wait for it at exit. Everything else is closed: leave now.
        logging.shutdown()
        os._exit(0)
    return 0
