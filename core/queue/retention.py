"""How long finished jobs stay: their TTL while Redis has room, the oldest going first when it
nears its maxmemory (lua/retain.lua), so that new work always finds room."""

from __future__ import annotations

from core.infra.redis_client import RedisClient
from core.queue import scripts
from core.queue.keys import Keys

# Past this share of maxmemory the oldest finished jobs go, a batch a second per web process:
# what is left is the queue's own working room (jobs running, events, chunks, voices).
RETAIN_BELOW = 0.85
BATCH = 500  # jobs removed at most per call
LOOK = 2_000  # index entries looked at at most per call (unfinished ones are skipped)


class Retention:
    def __init__(self, redis: RedisClient, keys: Keys, sharded: bool = False) -> None:
        self._keys = keys
        self._retain = scripts.Script(redis, "retain", sharded)

    async def make_room(self, used: int, limit: int) -> int:
        """With `used` bytes of a `limit` past RETAIN_BELOW, remove a batch of the oldest
        finished jobs; how many went."""
        if not limit or used < RETAIN_BELOW * limit:
            return 0
        removed, _ = await self._retain(
            keys={"index": self._keys.index, "stats": self._keys.stats},
            args={"most": BATCH, "look": LOOK},
        )
        return int(removed)
