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
from workers.batch import ActiveJob
from workers.engines import Engine, Segment
from workers.metrics import WorkerMetrics

log = logging.getLogger("chattts_online.worker")


@dataclass
class WorkerStats:
    started_at: float = field(default_factory=time.time)
    ready_s: float | None = None
    jobs_succeeded: int = 0
    jobs_failed: int = 0
    jobs_fenced: int = 0
    batches: int = 0
    segments: int = 0
    audio_seconds: float = 0.0
    busy_s: float = 0.0
    largest_batch: int = 0  # most segments in one engine call
    batch_jobs_max: int = 0  # most distinct jobs in one engine call (cross-request batching)

    def record_batch(self, batch: list[tuple[ActiveJob, Segment]], elapsed_s: float) -> None:
        """One engine call that succeeded."""
        self.busy_s += elapsed_s
        self.record_rows(batch)

    def record_rows(self, batch: list[tuple[ActiveJob, Segment]]) -> None:
        """Segments the engine served together (its busy time is counted as it passes)."""
        self.batches += 1
        self.segments += len(batch)
        self.largest_batch = max(self.largest_batch, len(batch))
        self.batch_jobs_max = max(self.batch_jobs_max, len({job.job_id for job, _ in batch}))

    def payload(
        self, name: str, engine: Engine, in_hand: int, stopping: bool, metrics_port: int | None
    ) -> dict[str, Any]:
        """The heartbeat document (JSON) stored under the worker's key."""
        return {
            "name": name,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "metrics_port": metrics_port,  # its Prometheus /metrics port; None: not serving
            "engine": engine.name,
            "model_version": engine.model_version,
            "sample_rate": engine.sample_rate,
            "max_batch": engine.max_batch,
            "voices": [v.public() for v in engine.voices()],
            "started_at": self.started_at,
            "ready_s": self.ready_s,
            "ts": time.time(),
            "in_hand": in_hand,
            "jobs_succeeded": self.jobs_succeeded,
            "jobs_failed": self.jobs_failed,
            "jobs_fenced": self.jobs_fenced,
            "batches": self.batches,
            "segments": self.segments,
            "audio_seconds": round(self.audio_seconds, 3),
            "busy_s": round(self.busy_s, 3),
            "stopping": stopping,
            "state": "stopping" if stopping else "ready",
            "largest_batch": self.largest_batch,
            "batch_jobs_max": self.batch_jobs_max,
            "engine_stats": engine_stats(engine),
        }


def engine_stats(engine: Engine) -> dict[str, Any]:
    """The engine's own counters (ChatTTS: infer calls, OOM splits, truncations)."""
    return engine.stats()


async def publish_heartbeats(
    queue: Queue,
    name: str,
    period_s: float,
    beat: Callable[[], dict[str, Any]],
    metrics: WorkerMetrics,
) -> None:
    """Store `beat()` under the worker's key every `period_s`; the key lives 3 periods."""
    ttl_ms = int(period_s * 3000)
    while True:
        try:
            await queue.fleet.beat(name, beat(), ttl_ms)
        except RedisError as exc:
            metrics.redis_error()
            log.warning("worker %s: heartbeat failed: %s", name, exc)
        await asyncio.sleep(period_s)
