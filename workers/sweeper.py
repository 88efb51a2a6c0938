"""The audio store's sweep: objects that no job or cache entry records any more, removed by every
worker (a delete is idempotent, and the store outlives any one worker)."""

from __future__ import annotations

import asyncio
import logging

from redis.exceptions import RedisError

from core.audio_store.base import StoreError
from core.queue.store import Queue

log = logging.getLogger("chattts_online.worker")

# Orphans of the audio store (a crash between writing a file and recording it, expired jobs and
# cache entries) cost disk, not correctness: a sweep every few minutes is enough.
SWEEP_EVERY_S = 300.0


async def sweep_audio(queue: Queue) -> None:
    """Sweep every SWEEP_EVERY_S while the queue has an audio store."""
    while queue.stored.store is not None:
        await asyncio.sleep(SWEEP_EVERY_S)
        try:
            removed = await queue.stored.sweep()
        except (StoreError, RedisError) as exc:
            log.warning("audio sweep failed: %s", exc)
            continue
        except Exception:  # a surprise in one sweep must not end the sweeping for good
            log.exception("audio sweep failed")
            continue
        if removed:
            log.info("audio sweep: %d objects no job or cache entry records", removed)
