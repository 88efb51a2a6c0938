"""Rate limits and connection caps, held in Redis so that they hold across web replicas.

The buckets and leases are two small Lua scripts of the queue (core/queue/limits.py), written
there rather than taken from a library: the well-kept ones (`limits`, `aiohttp-ratelimiter`)
bring a Redis client of their own (coredis) or keep counts in process memory, and we need our
own client (its timeouts, Sentinel and Cluster) and one slot per queue.

- `check_rate` is GCRA (a token bucket kept as one timestamp per key): `rate` requests per second
  on average, `burst` at once, for every bucket of a request in one script. It answers how long
  to wait when refused.
- `lease` counts live connections as a sorted set of leases that expire: a web process that dies
  holding connections frees them after LEASE_S without anyone cleaning up.

Every refusal is a 429 with Retry-After and a JSON body naming the limit (RateLimited).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import math
import secrets
from collections.abc import AsyncIterator
from functools import lru_cache
from typing import Any

from aiohttp import web

from core.queue.limits import Bucket, Limits
from web.appkeys import QUEUE, SETTINGS
from web.clients.identity import client_id
from web.errors import ApiError, ErrorDetail
from web.monitors.memory import address

# A connection's lease: renewed every LEASE_S / 3 while it lives, gone LEASE_S after a crash.
LEASE_S = 60.0


class RateLimited(ApiError):
    def __init__(self, what: str, limit: str, retry_after_s: float, fix: str) -> None:
        wait = max(1, math.ceil(retry_after_s))
        super().__init__(
            429,
            f"too many {what}: the limit is {limit}; retry in {wait} s{fix}",
            code="rate_limited",
            headers={"Retry-After": str(wait)},
        )
        self.limit = what
        self.retry_after_s = retry_after_s

    def error(self) -> ErrorDetail:
        detail = super().error()
        detail["limit"] = self.limit
        return detail


async def check_rate(
    limits: Limits, scope: str, who: dict[str, tuple[str, float, int]], fix: str = ""
) -> None:
    """Raise RateLimited when any of `who` ({kind: (identity, per second, burst)}) is over; one
    round trip for all of them (a rate of 0 is no limit)."""
    buckets = [Bucket(kind, ident, per_s, burst) for kind, (ident, per_s, burst) in who.items()]
    refused = await limits.take(scope, [b for b in buckets if b.per_s > 0])
    if refused is not None:
        bucket, wait_s = refused
        what = f"{scope} from this {bucket.kind}"
        limit = f"{bucket.per_s:g} per second (bursts of {bucket.burst})"
        raise RateLimited(what, limit, wait_s, fix)


@contextlib.asynccontextmanager
async def connection_lease(limits: Limits, caps: dict[str, tuple[str, int]]) -> AsyncIterator[None]:
    """Hold a live-connection lease under each of `caps` ({key: (what, cap)}) while the block
    runs; RateLimited when any is full (leases taken so far are given back)."""
    member = secrets.token_hex(8)
    held: list[str] = []
    try:
        for key, (what, cap) in caps.items():
            if cap <= 0:
                continue
            if not await limits.lease(key, member, cap, LEASE_S):
                raise RateLimited(
                    what, f"{cap} open at once", LEASE_S / 6, "; close another stream first"
                )
            held.append(key)
        renewer = asyncio.create_task(_renew(limits, held, member)) if held else None
        try:
            yield
        finally:
            if renewer is not None:
                renewer.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await renewer
    finally:
        if held:
            with contextlib.suppress(Exception):
                await limits.release(held, member)


# An IPv6 site is given a /48: its /64s (each an address to the limits) share a bucket of this
# many addresses' rate besides their own.
NETWORK_PREFIX = 48
NETWORK_SHARE = 4


@lru_cache(maxsize=4096)
def ipv6_network(source: str) -> str | None:
    """The /48 of an IPv6 source (its /64, as address() gives it); None for IPv4."""
    if ":" not in source:
        return None
    try:
        net = ipaddress.IPv6Network(source, strict=False)
    except ValueError:
        return None
    return str(net.supernet(new_prefix=NETWORK_PREFIX)) if net.prefixlen > NETWORK_PREFIX else None


def submitters(app: web.Application, client: str, source: str) -> dict[str, tuple[str, float, int]]:
    """The buckets a submission of `client` from `source` is charged to."""
    limits = app[SETTINGS].limits
    who = {
        "client": (client, limits.submit_rate_per_client, limits.submit_burst_per_client),
        "address": (source, limits.submit_rate_per_address, limits.submit_burst_per_address),
    }
    network = ipv6_network(source)
    if network is not None:  # a /48 holds 65,536 /64s: together, four addresses' worth
        who["network"] = (
            network,
            NETWORK_SHARE * limits.submit_rate_per_address,
            NETWORK_SHARE * limits.submit_burst_per_address,
        )
    return who


def stream_lease(request: web.Request, client: str | None = None) -> Any:
    """The lease a connection that waits holds while it is open: an SSE stream, a WebSocket, a
    speech answer being made (OpenAI's, captioned)."""
    return leases(request.app, client or client_id(request), address(request))


def leases(app: web.Application, client: str, source: str) -> Any:
    """A waiting connection's leases, under its client's and its address's caps."""
    settings, queue = app[SETTINGS], app[QUEUE]
    caps = {
        queue.keys.leases("client", client): (
            "connections waiting at once for this client (event streams, WebSockets, speech "
            "answers being made)",
            settings.limits.streams_per_client,
        ),
        queue.keys.leases("address", source): (
            "connections waiting at once from this address (event streams, WebSockets, speech "
            "answers being made)",
            settings.limits.streams_per_address,
        ),
    }
    return connection_lease(queue.limits, caps)


async def _renew(limits: Limits, keys: list[str], member: str) -> None:
    while True:
        await asyncio.sleep(LEASE_S / 3)
        with contextlib.suppress(Exception):  # a Redis outage: the lease may lapse, no harm
            for key in keys:
                await limits.lease(key, member, 1 << 30, LEASE_S)


def live_lease(request: web.Request, client: str | None = None) -> Any:
    """The lease a live connection holds while it is open (besides its stream lease): live
    sessions keep workers busy for as long as text comes, so they have caps of their own."""
    settings, queue = request.app[SETTINGS], request.app[QUEUE]
    caps = {
        queue.keys.leases("live-client", client or client_id(request)): (
            "live sessions open at once for this client",
            settings.limits.live_sessions_per_client,
        ),
        queue.keys.leases("live-address", address(request)): (
            "live sessions open at once from this address",
            settings.limits.live_sessions_per_address,
        ),
    }
    return connection_lease(queue.limits, caps)
