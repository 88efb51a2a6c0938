"""Retry-After for refused submissions, estimated from the queue's measured throughput.

Each web process samples, every `SAMPLE_S` seconds in the background, the queue's shared `stats`
hash (jobs that reached a terminal state, counted by the Lua scripts of every worker) and the
length of the jobs stream: one pipelined HMGET + XLEN, never any Redis work per request. The
completion rate is the growth of that count over the samples of the last `WINDOW_S` seconds.

A client refused because the backlog is full should come back once the jobs ahead of it are
done: depth / rate seconds. A client at its cap of unfinished jobs waits for the next of its own
jobs to finish; with its `active` jobs spread through a queue of `depth`, that is about
depth / (active x rate). Answers are whole seconds clamped to [MIN_S, MAX_S]. Without a rate yet
(the process has sampled for less than MIN_SPAN_S) the answer is DEFAULT_S; when nothing finished
over a full window while jobs wait (no worker, or stalled ones) it is MAX_S.

The sample also reads Redis's memory: past 85% of its maxmemory the oldest finished jobs go before
their TTL, a batch a sample (core/queue/retention.py); at its maxmemory, submissions get 503 at
once (store_full);
and its replication: with fewer replicas in sync than CHATTTS_REDIS_MIN_REPLICAS (a failover, a
replica resyncing), submissions get 503 at once, before anything is written (replicas_short).

The same sample is the process's health probe of Redis. DOWN_AFTER_FAILURES failed probes in a
row (errors, or no answer within PROBE_TIMEOUT_S: a hung or unreachable server, where each command
would wait out its socket timeout) mark the store down: API requests then get their 503 at once
(errors.error_middleware) until a probe succeeds again, a second or so after Redis is back. A
refused connection fails in milliseconds, so a dead Redis is seen at once; a silent one only after
about DOWN_AFTER_FAILURES x PROBE_TIMEOUT_S, because a starved 2-core machine can leave a healthy
Redis unanswered for half a second and a false verdict refuses good requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from redis.exceptions import RedisError

from core.infra.topology import replicas_in_sync
from core.queue.results import Room
from core.queue.store import Queue
from web.monitors.backlog import BacklogAlert

log = logging.getLogger("chattts_online.web.throughput")

SAMPLE_S = 1.0
WINDOW_S = 60.0
MIN_SPAN_S = 1.0
MIN_S, MAX_S = 1, 300
DEFAULT_S = 5
STOP_TIMEOUT_S = 2.0
# Redis answers a probe in well under a millisecond; a second of silence is a hang or a CPU so
# starved that the request would fail anyway. (0.5 s gave false outages on a busy CI machine.)
PROBE_TIMEOUT_S = 1.0
# A probe's timeout that fires this much late says our own event loop was stalled (a long
# synchronous call, a starved CPU), not that Redis hung: no verdict.
LATE_FACTOR = 1.5
# Three silent seconds before answering 503 at once: still well under the 5 s socket timeout each
# request would otherwise wait out.
DOWN_AFTER_FAILURES = 3
# Counters of the stats hash that mean "a job left the queue for good".


@dataclass(frozen=True)
class Sample:
    at: float
    finished: int
    depth: int


class ThroughputMeter:
    """A sliding window of (time, finished jobs, queue depth) samples."""

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, alert: BacklogAlert | None = None
    ) -> None:
        self._clock = clock
        self.alert = alert or BacklogAlert(0)
        self._samples: deque[Sample] = deque()
        self.failures = 0  # probes failed in a row
        self.store_full = False  # Redis is at its maxmemory (noeviction): admit no new work
        # Room for new audio: the audio store's, or Redis's below its maxmemory where audio is
        # kept there (None: unknown or unbounded). Sampled, so that a submit costs no I/O.
        self.free_bytes: int | None = None
        self.maxmemory = 0  # Redis's maxmemory at the last sample (0: none)
        self.retired_early = 0  # finished jobs this process removed before their TTL
        self.replication: dict[str, object] = {}  # the queue's primary's INFO replication
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def room(self, chunk_budget: int, where: str) -> Room:
        """What a new job may take (the queue checks it against what accepted jobs will still
        write, lua/enqueue.lua): the store's free bytes at the last sample, and the bytes
        streams may keep in Redis, a quarter of its maxmemory at most."""
        if chunk_budget and self.maxmemory:
            chunk_budget = min(chunk_budget, self.maxmemory // 4)
        return Room(self.free_bytes, chunk_budget, where)

    @property
    def store_down(self) -> bool:
        """Redis failed the last probes: answer 503 at once rather than wait on it."""
        return self.failures >= DOWN_AFTER_FAILURES

    @property
    def replicas_in_sync(self) -> int | None:
        """Replicas streaming from the queue's primary at the last sample (None: not known)."""
        return replicas_in_sync(self.replication) if self.replication else None

    def add(self, finished: int, depth: int) -> None:
        now = self._clock()
        if self._samples and finished < self._samples[-1].finished:
            self._samples.clear()  # the counters were reset (a Redis without its data)
        self._samples.append(Sample(now, finished, depth))
        while len(self._samples) > 2 and now - self._samples[1].at >= WINDOW_S:
            self._samples.popleft()

    @property
    def span(self) -> float:
        return self._samples[-1].at - self._samples[0].at if self._samples else 0.0

    @property
    def depth(self) -> int | None:
        """Jobs in the queue (waiting or running) at the last sample."""
        return self._samples[-1].depth if self._samples else None

    def rate(self) -> float | None:
        """Jobs finished per second over the window; None before MIN_SPAN_S of samples."""
        if self.span < MIN_SPAN_S:
            return None
        return (self._samples[-1].finished - self._samples[0].finished) / self.span

    def retry_after(self, depth: int | None = None, share: int = 1) -> int:
        """Seconds until `depth` jobs (by default the sampled depth) are done, `share` at a time."""
        depth = self.depth if depth is None else depth
        rate = self.rate()
        if depth is None or rate is None:
            return DEFAULT_S
        if rate <= 0:
            return MAX_S if depth > 0 and self.span >= WINDOW_S / 2 else DEFAULT_S
        return max(MIN_S, min(MAX_S, math.ceil(depth / max(1, share) / rate)))

    async def sample(self, queue: Queue) -> None:
        sample = await queue.readings.sample()
        self.replication = sample.replication
        # Redis refuses plain writes past maxmemory but lets scripts without flags write on:
        # the web tier admits no new jobs or voices meanwhile (work in flight still finishes).
        limit = int(sample.memory.get("maxmemory") or 0)
        self.maxmemory = limit
        full = bool(limit) and int(sample.memory.get("used_memory") or 0) >= limit
        if full != self.store_full:
            log.warning("Redis is %s its maxmemory", "at" if full else "below")
        self.store_full = full
        used = int(sample.memory.get("used_memory") or 0)
        removed = await queue.retention.make_room(used, limit)
        if removed:  # the oldest finished jobs, before their TTL: new work keeps its room
            self.retired_early += removed
            log.info("Redis near its maxmemory: %d finished jobs removed before their TTL", removed)
        if queue.stored.store is not None:
            self.free_bytes = await queue.stored.store.free_bytes()
        else:
            self.free_bytes = (
                max(0, limit - int(sample.memory.get("used_memory") or 0)) if limit else None
            )
        self.add(sample.finished, sample.depth + sample.waiting)
        # Entries leave the streams when their job ends: what is not pending has not started.
        waiting = sample.depth + sample.depth_high - sample.in_hand + sample.waiting
        self.alert.update(max(0, waiting))

    async def probe(self, queue: Queue) -> bool | None:
        """Sample once: True (Redis answered), False (it did not), None (no verdict)."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            async with asyncio.timeout(PROBE_TIMEOUT_S):
                await self.sample(queue)
        except (RedisError, OSError, TimeoutError) as exc:
            late = loop.time() - started > LATE_FACTOR * PROBE_TIMEOUT_S
            if isinstance(exc, TimeoutError) and late:
                return None  # our own event loop was blocked, not Redis
            self.failures += 1
            if self.failures == DOWN_AFTER_FAILURES:
                log.warning("Redis does not answer (%r): API requests get 503 at once", exc)
            return False
        if self.store_down:
            log.info("Redis answers again")
        self.failures = 0
        return True

    async def run(self, queue: Queue, stop: asyncio.Event) -> None:
        """Sample until `stop` is set; a Redis outage only pauses it (old samples age out)."""
        while not stop.is_set():
            verdict = await self.probe(queue)
            if verdict is not True and not self.store_down:
                continue  # probe again at once: one slow answer is not an outage
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(SAMPLE_S):
                    await stop.wait()

    async def start(self, queue: Queue) -> None:
        """Sample in the background from now on (after the Redis client exists)."""
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self.run(queue, self._stop), name="throughput-sampler")

    async def stop(self) -> None:
        # Let a sample in flight finish: a cancellation landing inside redis-py's read can be
        # swallowed (and then the wait would last a socket timeout). Cancel only as a last resort.
        if self._task is None:
            return
        self._stop.set()
        with contextlib.suppress(asyncio.CancelledError, TimeoutError):
            async with asyncio.timeout(STOP_TIMEOUT_S):
                await asyncio.shield(self._task)
        self._task.cancel()
        self._task = None
