"""What the parts of one worker process share: its name, settings, queue, engine, the jobs in
hand and the recorder. One per process, built once the engine is loaded."""

from __future__ import annotations

from dataclasses import dataclass

from core.infra.settings import Settings
from core.queue.store import Queue
from workers.engines import Engine
from workers.jobs import ActiveJob
from workers.metrics import WorkerMetrics


@dataclass(frozen=True)
class WorkerContext:
    name: str
    settings: Settings
    queue: Queue
    engine: Engine
    in_hand: dict[str, ActiveJob]  # job id -> the job, shared by every part
    metrics: WorkerMetrics
