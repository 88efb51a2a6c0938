"""A job's stored audio, read back: its file, its segments, a document's parts and its cues."""

from __future__ import annotations

from typing import Any

from core.infra.redis_client import RedisClient
from core.queue import scripts
from core.queue.keys import Keys


class StoredAudio:
    """What workers stored of each job's audio (the web tier serves it; it writes none)."""

    def __init__(self, redis: RedisClient, keys: Keys) -> None:
        self._redis, self._keys = redis, keys
        self._chunk_read = scripts.register(redis, "chunk_read")

    async def file(self, job_id: str) -> bytes | None:
        """A finished job's whole file (not a document's: its parts are joined when served)."""
        data: bytes | None = await self._redis.get(self._keys.audio(job_id))  # type: ignore[assignment]
        return data

    async def segments(self, job_id: str, start: int = 0) -> list[bytes]:
        """Encoded audio of the segments finished so far (index `start` onwards)."""
        data: list[bytes] = await self._redis.lrange(self._keys.segments(job_id), start, -1)  # type: ignore[assignment]
        return data

    async def segment(self, job_id: str, n: int) -> bytes | None:
        """Segment `n` (1-based) of a streaming job, if finished."""
        data: bytes | None = await self._redis.lindex(self._keys.segments(job_id), n - 1)  # type: ignore[assignment]
        return data

    async def part(self, job_id: str, n: int) -> bytes | None:
        """Part `n` (1-based) of a document job: its PCM, the pause before it included."""
        data: bytes | None = await self._redis.lindex(self._keys.parts(job_id), n - 1)  # type: ignore[assignment]
        return data

    async def parts(self, job_id: str, first: int, last: int) -> list[bytes]:
        """A document's parts `first`..`last` (0-based, inclusive)."""
        data: list[bytes] = await self._redis.lrange(self._keys.parts(job_id), first, last)  # type: ignore[assignment]
        return data

    async def part_count(self, job_id: str) -> int:
        return int(await self._redis.llen(self._keys.parts(job_id)))

    async def cues(self, job_id: str) -> list[bytes]:
        """The job's subtitle cues as stored (JSON, one per segment or part)."""
        raw: Any = await self._redis.lrange(self._keys.cues(job_id), 0, -1)
        return list(raw)

    async def cached(self, digest: str) -> dict[bytes, bytes]:
        """The result cache's entry for `digest` (core/queue/cache.py), empty on a miss."""
        raw: Any = await self._redis.hgetall(self._keys.cache(digest))
        return dict(raw)

    async def chunks_of_run(self, job_id: str, start: int, stop: int) -> tuple[list[bytes], int]:
        """Chunks `start`..`stop` (0-based, inclusive) and the run of the job they belong to
        (its `starts`), in one atomic read."""
        keys = [self._keys.job(job_id), self._keys.chunks(job_id)]
        reply: list[Any] = await self._chunk_read(keys=keys, args=[start, stop])
        return list(reply[1:]), int(reply[0])

    async def chunks(self, job_id: str, start: int, stop: int) -> list[bytes]:
        """Chunks `start`..`stop` (0-based, inclusive; -1: the last) of a streaming job."""
        out: list[bytes] = await self._redis.lrange(self._keys.chunks(job_id), start, stop)  # type: ignore[assignment]
        return out
