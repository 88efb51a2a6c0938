"""Rate buckets and connection leases in Redis, so that limits hold across every web replica.

The policy (who is limited, by how much, what a refusal says) is the web tier's; this module is
only how a bucket or a lease is taken, each in one script on Redis's own clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.infra.redis_client import RedisClient
from core.queue import scripts
from core.queue.keys import Keys


@dataclass(frozen=True)
class Bucket:
    """One rate: `per_s` requests a second in bursts of `burst`, for identity `who`."""

    kind: str
    who: str
    per_s: float
    burst: int


class Limits:
    """The rate buckets and connection leases of one queue."""

    def __init__(self, redis: RedisClient, keys: Keys) -> None:
        self._redis, self._keys = redis, keys
        self._take = scripts.Script(redis, "rate_take")
        self._lease = scripts.Script(redis, "lease_take")
        self._census = scripts.Script(redis, "connection_census")

    async def take(
        self, scope: str, buckets: list[Bucket], peek: bool = False
    ) -> tuple[Bucket, float] | None:
        """Charge one request to every bucket, or to none: None when all admit it, else the
        refusing bucket and the seconds to wait. One round trip for all of them. `peek`: only
        ask, charging nothing."""
        if not buckets:
            return None
        keys = [self._keys.rate(f"{scope}:{b.kind}", b.who) for b in buckets]
        limits = [limit for b in buckets for limit in (1000.0 / b.per_s, max(1, b.burst))]
        refused, wait_ms = await self._take(
            keys={"buckets": keys}, args={"peek": "1" if peek else "", "limits": limits}
        )
        if not int(refused):
            return None
        return buckets[int(refused) - 1], int(wait_ms) / 1000.0

    async def lease(self, key: str, member: str, cap: int, ttl_s: float) -> bool:
        """Hold (or renew) `member`'s place under `key` for `ttl_s`; False when `cap` are held."""
        args = {"member": member, "places": cap, "seconds": ttl_s}
        return bool(await self._lease(keys={"leases": key}, args=args))

    async def release(self, keys: list[str], member: str) -> None:
        async with self._redis.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.zrem(key, member)
            await pipe.execute()

    async def census(self, process: str, mine: dict[str, int], ttl_s: float) -> dict[str, int]:
        """Report `process`'s open connections by source (`mine`: those with many), kept for
        `ttl_s`; the other processes' reports summed by source. One round trip."""
        reported = [item for source, count in mine.items() for item in (source, count)]
        keys = {"due": self._keys.connection_reports_due, "counts": self._keys.connection_counts}
        answer = await self._census(
            keys=keys, args={"process": process, "seconds": ttl_s, "reported": reported}
        )
        return {
            scripts.as_text(source): int(count)
            for source, count in zip(answer[::2], answer[1::2], strict=True)
        }
