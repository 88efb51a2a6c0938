"""The bytes one web process holds for requests in flight (bodies being read, audio being sent
to clients that may never read it), bounded in all and per source address."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import time
from collections.abc import Iterator
from functools import lru_cache

from aiohttp import web

from web.errors import ApiError

# One IPv6 host gets a /64 (RFC 6177: what a home or a cloud machine is given): keyed by the
# address alone, one client would hold 2^64 buckets.
IPV6_PREFIX = 64


def address(request: web.Request) -> str:
    """The source an address limit counts: the address, an IPv6 one's /64 (behind a proxy: the
    proxy's; limits per address then share it)."""
    return source_of(request.remote)


@lru_cache(maxsize=4096)  # a few per request, on the submit path; an address's string is short
def source_of(remote: str | None) -> str:
    try:
        ip = ipaddress.ip_address(remote or "")
    except ValueError:
        return remote or "unknown"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, IPV6_PREFIX), strict=False))
    return str(ip)


class MemoryBudget:
    """Counts what requests hold; refuses what would pass a bound. A single request larger than
    a bound still passes when nothing else holds memory under it (sizes are bounded upstream)."""

    def __init__(self, total_bytes: int, per_address_bytes: int) -> None:
        self.total_bytes, self.per_address_bytes = total_bytes, per_address_bytes
        self.held = 0
        self._by_address: dict[str, int] = {}
        self._freed = asyncio.Event()

    def _refusal(self, address: str, size: int, what: str) -> ApiError | None:
        mine = self._by_address.get(address, 0)
        if mine and mine + size > self.per_address_bytes:
            return ApiError(
                429,
                f"{what}: this address already has {mine} bytes of requests in flight (at most "
                f"{self.per_address_bytes}); finish a download or an upload first",
                code="too_much_in_flight",
                headers={"Retry-After": "2"},
            )
        if self.held and self.held + size > self.total_bytes:
            return ApiError(
                503,
                f"{what}: the server is busy sending and receiving other requests; retry shortly",
                code="busy",
                headers={"Retry-After": "1"},
            )
        return None

    def take(self, address: str, size: int, what: str) -> None:
        """Count `size` bytes for `address`, or raise the 429 or 503 that says why not."""
        refusal = self._refusal(address, size, what)
        if refusal is not None:
            raise refusal
        self.held += size
        self._by_address[address] = self._by_address.get(address, 0) + size

    def give(self, address: str, size: int) -> None:
        self.held -= size
        left = self._by_address.get(address, 0) - size
        if left > 0:
            self._by_address[address] = left
        else:
            self._by_address.pop(address, None)
        self._freed.set()

    def resize(self, address: str, reserved: int, size: int) -> None:
        """A reservation of `reserved` bytes turns out to be `size` (never refused: the bytes
        are here already)."""
        self.held += size - reserved
        self._by_address[address] = self._by_address.get(address, 0) + size - reserved

    async def wait_take(self, address: str, size: int, what: str, timeout_s: float) -> None:
        """take(), waiting up to `timeout_s` for room (a WebSocket's audio waits its turn)."""
        deadline = time.monotonic() + timeout_s
        while self._refusal(address, size, what) is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            self._freed.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await self._freed.wait()
        self.take(address, size, what)

    @contextlib.contextmanager
    def hold(self, address: str, size: int, what: str) -> Iterator[None]:
        self.take(address, size, what)
        try:
            yield
        finally:
            self.give(address, size)

    @property
    def addresses(self) -> int:
        return len(self._by_address)
