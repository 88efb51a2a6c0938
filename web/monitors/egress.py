"""Bytes per source address and second (sent, or encoded for a stream): one address's downloads,
replays and encodings are paced, so that re-fetching large files cannot take the web process's
CPU from everyone else.

Per process, in memory: what is bounded is this process's work of writing bytes, which is local.
Written here rather than with aiolimiter: its AsyncLimiter is one bucket per object with a
queue of waiters; a bucket per address here is two floats, dropped once it is full again.
"""

from __future__ import annotations

import asyncio
import time

# A bucket refilled to its burst is idle: past this many addresses, those are dropped, in one
# pass a second at most (a pass is linear in the addresses: never one per write).
PRUNE_ABOVE = 4_096
PRUNE_EVERY_S = 1.0


class EgressPacer:
    """A token bucket of `rate` bytes a second (and `burst` at once) per address; `rate` 0: off.
    A sender that takes more than the bucket holds waits for the debt to be repaid."""

    def __init__(self, rate: float, burst: float) -> None:
        self.rate, self.burst = float(rate), float(max(burst, 1))
        self._buckets: dict[str, tuple[float, float]] = {}  # address -> (tokens, when)
        self._pruned = 0.0

    async def pace(self, address: str, size: int) -> None:
        """Take `size` bytes for `address`, sleeping while it is over its rate."""
        if self.rate <= 0 or size <= 0:
            await asyncio.sleep(0)
            return
        now = time.monotonic()
        tokens, then = self._buckets.get(address, (self.burst, now))
        tokens = min(self.burst, tokens + (now - then) * self.rate) - size
        if len(self._buckets) > PRUNE_ABOVE and now - self._pruned >= PRUNE_EVERY_S:
            self._prune(now)
        self._buckets[address] = (tokens, now)
        # Concurrent senders of one address each add their debt first: the waits stack up, and
        # the address's total stays at `rate`. Within its rate a sender still yields once per
        # piece: a socket that takes all at once must not hold the loop for a whole file.
        await asyncio.sleep(-tokens / self.rate if tokens < 0 else 0)

    def _prune(self, now: float) -> None:
        self._pruned = now
        rate, burst = self.rate, self.burst
        full = [a for a, (t, then) in self._buckets.items() if t + (now - then) * rate >= burst]
        for a in full:
            del self._buckets[a]
