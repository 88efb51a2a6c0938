"""Files derived from a finished job's record (subtitles, captions' word times, the API document):
made once per web process, off the event loop, and kept, so that asking again costs a lookup."""

from __future__ import annotations

import asyncio
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor

from web.errors import ApiError

# Builds of one source address at once: a document's subtitles take a CPU-second or more, and
# a client asking for many at a time must not take a process's threads from everyone.
BUILDS_PER_ADDRESS = 2
# Threads the builds run on, their own (store reads and everything else in threads go on
# without them), and the builds one process holds at once, running or waiting for a thread:
# past it, 503 busy with Retry-After, whatever the addresses.
BUILD_THREADS = 2
BUILDS_HELD = 8


class DerivedFiles:
    """Made bytes by key, least recently used evicted past `max_bytes`; one build per key at a
    time (concurrent askers share it), run on threads of its own; at most BUILDS_PER_ADDRESS per
    address and BUILDS_HELD in all.

    A few lines of OrderedDict rather than a cache library: the bound is on bytes, the builds
    are coalesced and limited per address, and nothing else here needs one.
    """

    def __init__(
        self,
        max_bytes: int,
        builds_per_address: int = BUILDS_PER_ADDRESS,
        builds_held: int = BUILDS_HELD,
    ) -> None:
        self.max_bytes, self.per_address, self.held = max_bytes, builds_per_address, builds_held
        self._pool = ThreadPoolExecutor(BUILD_THREADS, thread_name_prefix="derived")
        self._kept: OrderedDict[Hashable, bytes] = OrderedDict()
        self._size = 0
        self._building: dict[Hashable, asyncio.Future[bytes]] = {}
        self._by_address: Counter[str] = Counter()
        self.builds = 0  # made since the start (a test reads it)

    def __len__(self) -> int:
        return len(self._kept)

    def kept(self, key: Hashable) -> bytes | None:
        """The bytes of `key` if they are kept (None: make them with `get`)."""
        kept = self._kept.get(key)
        if kept is not None:
            self._kept.move_to_end(key)
        return kept

    async def get(self, key: Hashable, build: Callable[[], bytes], address: str) -> bytes:
        """The bytes of `key`, made by `build` (in a thread) when not kept."""
        kept = self.kept(key)
        if kept is not None:
            return kept
        pending = self._building.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        if self._by_address[address] >= self.per_address:
            raise ApiError(
                429,
                f"{self.per_address} files are being made for your address already (subtitles "
                "of long jobs take a while): wait for them, then ask again",
                code="too_many_builds",
                headers={"Retry-After": "1"},
            )
        if len(self._building) >= self.held:
            raise ApiError(
                503,
                f"this server is making {self.held} files already: ask again in a moment",
                code="busy",
                headers={"Retry-After": "1"},
            )
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bytes] = loop.create_future()
        self._building[key] = future
        self._by_address[address] += 1
        try:
            data = await loop.run_in_executor(self._pool, build)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: nobody else may be waiting
            raise
        finally:
            del self._building[key]
            self._by_address[address] -= 1
            if not self._by_address[address]:
                del self._by_address[address]
        self.builds += 1
        future.set_result(data)
        self._keep(key, data)
        return data

    def close(self) -> None:
        """Stop taking builds (those running finish in their threads)."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def put(self, key: Hashable, data: bytes) -> None:
        """Keep `data` as `key`'s bytes (made by the caller)."""
        if key not in self._kept:
            self._keep(key, data)

    def _keep(self, key: Hashable, data: bytes) -> None:
        if len(data) > self.max_bytes // 4:
            return  # one file must not evict everything else
        self._kept[key] = data
        self._size += len(data)
        while self._size > self.max_bytes:
            _, old = self._kept.popitem(last=False)
            self._size -= len(old)
