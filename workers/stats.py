"""A worker's running statistics, published in its heartbeat key for probes and `/v1/voices`."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from .engines import Engine


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

    def payload(self, name: str, engine: Engine, in_hand: int, stopping: bool) -> dict[str, Any]:
        """The heartbeat document (JSON) stored under the worker's key."""
        return {
            "name": name,
            "pid": os.getpid(),
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
            "largest_batch": self.largest_batch,
            "batch_jobs_max": self.batch_jobs_max,
            "engine_stats": engine_stats(engine),
        }


def engine_stats(engine: Engine) -> dict[str, Any]:
    """The engine's own counters (ChatTTS: infer calls, OOM splits, truncations), if it has any."""
    stats = getattr(engine, "stats", None)
    result: dict[str, Any] = stats() if callable(stats) else {}
    return result
