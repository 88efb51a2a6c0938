"""The live workers of a queue, as their heartbeats describe them."""

from __future__ import annotations

from typing import Any

import orjson

from core.infra.redis_client import RedisClient
from core.queue.keys import Keys


class Fleet:
    """Heartbeats of one queue's workers (each expires unless its worker renews it)."""

    def __init__(self, redis: RedisClient, keys: Keys) -> None:
        self._redis, self._keys = redis, keys

    async def heartbeats(self, loading: bool = False) -> list[dict[str, Any]]:
        """Heartbeats of the workers alive now and ready to synthesize; `loading`: those still
        loading their model too."""
        names: Any = await self._redis.zrange(self._keys.workers, 0, -1)
        if not names:
            return []
        beats: Any = await self._redis.mget([self._keys.worker(n.decode()) for n in names])
        out = []
        for raw in beats:
            if raw is None:
                continue
            try:
                beat = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            if isinstance(beat, dict) and (loading or beat.get("state") != "loading"):
                out.append(beat)
        return out

    async def heartbeat(self, name: str) -> dict[str, Any] | None:
        """Worker `name`'s last heartbeat, if it is alive."""
        raw = await self._redis.get(self._keys.worker(name))
        beat: dict[str, Any] | None = orjson.loads(raw) if raw is not None else None
        return beat

    async def beat(self, name: str, document: dict[str, Any], ttl_ms: int) -> str | None:
        """Worker `name` is alive, as `document` says (its `ts`: now), for `ttl_ms`; workers
        whose heartbeats lapsed leave the list. The operator who asked it to drain, if one did
        (core/queue/console.py)."""
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.set(self._keys.worker(name), orjson.dumps(document), px=ttl_ms)
            pipe.zadd(self._keys.workers, {name: document["ts"]})
            pipe.zremrangebyscore(self._keys.workers, 0, document["ts"] - ttl_ms / 1000)
            pipe.getdel(self._keys.drain(name))  # answered once, by the worker it names
            *_, drain = await pipe.execute()
        return drain.decode() if isinstance(drain, bytes) else drain

    async def leave(self, name: str) -> None:
        """Worker `name` stopped: its heartbeat (and any drain request) goes at once."""
        async with self._redis.pipeline(transaction=False) as pipe:
            queue_leave(pipe, self._keys, name)
            await pipe.execute()


def queue_leave(pipe: Any, keys: Keys, name: str) -> None:
    """Queue on `pipe` (a pipeline, with or without an event loop: `run`'s supervisor removes a
    worker that died) what worker `name` leaving the fleet deletes."""
    pipe.delete(keys.worker(name), keys.drain(name))
    pipe.zrem(keys.workers, name)
