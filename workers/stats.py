"""A worker's running statistics, published in its heartbeat key for probes and `/v1/voices`."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from redis.exceptions import RedisError

from core.queue.store import Queue
from workers.engines import Engine
from workers.metrics import WorkerMetrics

log = logging.getLogger("chattts_online.worker")


@dataclass
class WorkerStats:
    """When the worker started and became ready; its counts are the recorder's tally."""

    started_at: float = field(default_factory=time.time)
    ready_s: float | None = None
    # The last heartbeat's (time, steps), for the steps a second since.
    _last: tuple[float, int] | None = None

    def rate(self, steps: int) -> float:
        """Steps (segments synthesized) a second since the last heartbeat."""
        now, last = time.monotonic(), self._last
        self._last = (now, steps)
        if last is None or now <= last[0]:
            return 0.0
        return round((steps - last[1]) / (now - last[0]), 3)

    def payload(
        self, name: str, engine: Engine, in_hand: int, stopping: bool, metrics: WorkerMetrics
    ) -> dict[str, Any]:
        """The heartbeat document (JSON) stored under the worker's key."""
        tally = metrics.tally
        own = engine.stats()  # its own counters (ChatTTS: infer calls, OOM splits, truncations)
        # A decode runtime counts its steps; an engine without one, its segments.
        steps = int(own.get("runtime_steps", tally.segments))
        return {
            "name": name,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "metrics_port": metrics.port,  # its Prometheus /metrics port; None: not serving
            "engine": engine.name,
            "device": str(own.get("device", "cpu")),
            "model_version": engine.model_version,
            "sample_rate": engine.sample_rate,
            "max_batch": engine.max_batch,
            "voices": [v.public() for v in engine.voices()],
            "capabilities": engine.capabilities.public(),
            "started_at": self.started_at,
            "ready_s": self.ready_s,
            "ts": time.time(),
            "in_hand": in_hand,
            "jobs_succeeded": tally.jobs_succeeded,
            "jobs_failed": tally.jobs_failed,
            "jobs_fenced": tally.jobs_fenced,
            "batches": tally.batches,
            "segments": tally.segments,
            "audio_seconds": round(tally.audio_seconds, 3),
            "busy_s": round(tally.busy_s, 3),
            "stopping": stopping,
            "state": "draining" if stopping else "ready",
            "steps_per_s": self.rate(steps),
            "largest_batch": tally.largest_batch,
            "batch_jobs_max": tally.batch_jobs_max,
            "checks": tally.checks,
            "engine_stats": own,
        }


async def publish_heartbeats(
    queue: Queue,
    name: str,
    period_s: float,
    beat: Callable[[], dict[str, Any]],
    metrics: WorkerMetrics,
    drain: Callable[[str], None] | None = None,
) -> None:
    """Store `beat()` under the worker's key every `period_s`; the key lives 3 periods. An
    operator's request to drain (core/queue/console.py) is answered with `drain(who)`."""
    ttl_ms = int(period_s * 3000)
    while True:
        try:
            asked_by = await queue.fleet.beat(name, beat(), ttl_ms)
        except RedisError as exc:
            metrics.redis_error()
            log.warning("worker %s: heartbeat failed: %s", name, exc)
        else:
            if asked_by is not None and drain is not None:
                drain(asked_by)
        await asyncio.sleep(period_s)
