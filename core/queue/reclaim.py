"""Reclaiming entries whose worker stopped renewing their lease (it died or hung): XAUTOCLAIM
with a cursor kept between calls, and the group's dead consumers forgotten now and then."""

from __future__ import annotations

from typing import Any

from core.infra.redis_client import RedisClient
from core.queue.keys import CONSUMER_GROUP, Keys
from core.queue.scripts import as_text

# XAUTOCLAIM scans about 10 x COUNT pending entries per call; a few calls per reclaim tick.
RECLAIM_CALLS_PER_SWEEP = 10
# Dead workers leave their consumer names in the group; sweep them every this many reclaims.
CONSUMER_SWEEP_EVERY = 50


class Reclaimer:
    """XAUTOCLAIM with a cursor kept between calls.

    XAUTOCLAIM scans a bounded slice of the pending list per call: keeping the cursor means that,
    with many healthy running jobs ahead, expired ones further on are still found.
    """

    def __init__(self, redis: RedisClient, keys: Keys, consumer: str, lease_ms: int) -> None:
        """`consumer`: the worker's name in the group; `lease_ms`: how long an entry may go
        unrenewed before another worker takes it."""
        self.redis = redis
        self.keys = keys
        self.consumer = consumer
        self.lease_ms = lease_ms
        self.cursors = dict.fromkeys(keys.streams, "0-0")
        self.sweeps = 0

    async def sweep(self, capacity: int) -> list[tuple[str, str, dict[bytes, bytes]]]:
        """Claim up to `capacity` expired entries: [(stream, entry id, entry fields)]."""
        claimed: list[tuple[str, str, dict[bytes, bytes]]] = []
        for stream in self.keys.streams:
            for _ in range(RECLAIM_CALLS_PER_SWEEP):
                if len(claimed) >= capacity:
                    break
                result: Any = await self.redis.xautoclaim(
                    stream,
                    CONSUMER_GROUP,
                    self.consumer,
                    min_idle_time=self.lease_ms,
                    start_id=self.cursors[stream],
                    count=capacity - len(claimed),
                )
                self.cursors[stream] = result[0].decode()
                claimed.extend(
                    (stream, entry_id.decode(), fields)
                    for entry_id, fields in result[1]
                    if fields  # None or empty: the entry was deleted meanwhile
                )
                if self.cursors[stream] == "0-0":
                    break
        self.sweeps += 1
        if self.sweeps % CONSUMER_SWEEP_EVERY == 0:
            await self.forget_idle_consumers()
        return claimed

    async def forget_idle_consumers(self) -> None:
        """Delete group consumers that own nothing and were idle for long (dead workers' names)."""
        idle_limit_ms = max(60_000, 10 * self.lease_ms)
        for stream in self.keys.streams:
            consumers: Any = await self.redis.xinfo_consumers(stream, CONSUMER_GROUP)
            for consumer in consumers:
                name = as_text(consumer["name"])
                idle = consumer["pending"] == 0 and consumer["idle"] > idle_limit_ms
                if name != self.consumer and idle:
                    await self.redis.xgroup_delconsumer(stream, CONSUMER_GROUP, name)
