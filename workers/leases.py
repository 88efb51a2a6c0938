"""Leases: renew the jobs in hand (the queue reclaims entries whose worker stopped renewing them:
core/queue/reclaim.py)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from redis.exceptions import RedisError

from core.queue.store import Queue
from workers.jobs import ActiveJob
from workers.metrics import WorkerMetrics

log = logging.getLogger("chattts_online.worker")


async def renew_leases(
    queue: Queue,
    in_hand: Mapping[str, ActiveJob],
    worker: str,
    lease_ms: int,
    metrics: WorkerMetrics,
) -> None:
    """Renew every in-hand job's lease at a third of its length; learn of cancels and loss."""
    while True:
        await asyncio.sleep(lease_ms / 3000)
        for job in list(in_hand.values()):
            try:
                verdict = await queue.work.renew(
                    job.job_id, job.started.token, worker, stream=job.started.stream
                )
            except RedisError as exc:
                log.warning("worker %s: lease renewal failed: %s", worker, exc)
                metrics.lease_renewal_failed()
                break
            if verdict == "cancel":
                job.stop()
            elif verdict == "lost":
                log.warning(
                    "worker %s: lost the lease of %s",
                    *(worker, job.job_id),
                    extra={"job_id": job.job_id},
                )
                job.lose()
