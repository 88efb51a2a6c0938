"""Rate limits and connection caps, held in Redis so that they hold across web replicas.

Two small Lua scripts, written here rather than taken from a library: the well-kept ones
(`limits`, `aiohttp-ratelimiter`) bring a Redis client of their own (coredis) or keep counts in
process memory, and we need our own client (its timeouts, Sentinel and Cluster later) and one
slot per queue.

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
import math
import secrets
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from core.infra.redis_client import RedisClient
from core.queue.keys import Keys
from web.appkeys import QUEUE, SETTINGS
from web.clients.identity import client_id
from web.errors import ApiError

# A connection's lease: renewed every LEASE_S / 3 while it lives, gone LEASE_S after a crash.
LEASE_S = 60.0

# All of a request's buckets at once: it is admitted by every one or charged to none.
_ALLOW = """
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local next_tat = {}
for i, key in ipairs(KEYS) do
  local interval, burst = tonumber(ARGV[2 * i - 1]), tonumber(ARGV[2 * i])
  local tat = tonumber(redis.call('GET', key) or now)
  if tat < now then tat = now end
  local wait = tat + interval - now - interval * burst
  if wait > 0 then return {i, math.ceil(wait)} end
  next_tat[i] = tat + interval
end
for i, key in ipairs(KEYS) do
  redis.call('SET', key, next_tat[i], 'PX', math.ceil(next_tat[i] - now))
end
return {0, 0}
"""

_LEASE = """
local t = redis.call('TIME')
local now = t[1] + t[2] / 1e6
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZSCORE', KEYS[1], ARGV[1]) == false
   and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[3])))
return 1
"""


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

    def error(self) -> dict[str, Any]:
        return {**super().error(), "limit": self.limit}


async def check_rate(
    redis: RedisClient,
    keys: Keys,
    scope: str,
    who: dict[str, tuple[str, float, int]],
    fix: str = "",
) -> None:
    """Raise RateLimited when any of `who` ({kind: (identity, per second, burst)}) is over; one
    round trip for all of them (a rate of 0 is no limit)."""
    kinds = [(kind, spec) for kind, spec in who.items() if spec[1] > 0]
    if not kinds:
        return
    buckets = [keys.rate(f"{scope}:{kind}", identity) for kind, (identity, _, _) in kinds]
    args: list[float] = []
    for _, (_, per_s, burst) in kinds:
        args += [1000.0 / per_s, max(1, burst)]
    refused, wait_ms = await redis.eval(_ALLOW, len(buckets), *buckets, *args)
    if int(refused):
        kind, (_, per_s, burst) = kinds[int(refused) - 1]
        what = f"{scope} from this {kind}"
        limit = f"{per_s:g} per second (bursts of {burst})"
        raise RateLimited(what, limit, int(wait_ms) / 1000.0, fix)


@contextlib.asynccontextmanager
async def connection_lease(
    redis: RedisClient, caps: dict[str, tuple[str, int]]
) -> AsyncIterator[None]:
    """Hold a live-connection lease under each of `caps` ({key: (what, cap)}) while the block
    runs; RateLimited when any is full (leases taken so far are given back)."""
    member = secrets.token_hex(8)
    held: list[str] = []
    try:
        for key, (what, cap) in caps.items():
            if cap <= 0:
                continue
            if not await redis.eval(_LEASE, 1, key, member, cap, LEASE_S):
                raise RateLimited(
                    what, f"{cap} open at once", LEASE_S / 6, "; close another stream first"
                )
            held.append(key)
        renewer = asyncio.create_task(_renew(redis, held, member)) if held else None
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
                async with redis.pipeline(transaction=False) as pipe:
                    for key in held:
                        pipe.zrem(key, member)
                    await pipe.execute()


def address(request: web.Request) -> str:
    """The source address (behind a proxy: the proxy's; limits per address then share it)."""
    return request.remote or "unknown"


async def check_submit(request: web.Request, client: str | None = None) -> None:
    """A submission (any API): within its client's and its address's rates, else 429."""
    settings, queue = request.app[SETTINGS], request.app[QUEUE]
    who = {
        "client": (
            client or client_id(request),
            settings.submit_rate_per_client,
            settings.submit_burst_per_client,
        ),
        "address": (
            address(request),
            settings.submit_rate_per_address,
            settings.submit_burst_per_address,
        ),
    }
    await check_rate(queue.redis, queue.keys, "submissions", who)


def stream_lease(request: web.Request, client: str | None = None) -> Any:
    """The lease an SSE stream or a WebSocket holds while it is open."""
    settings, queue = request.app[SETTINGS], request.app[QUEUE]
    caps = {
        queue.keys.leases("client", client or client_id(request)): (
            "event streams and WebSockets open for this client",
            settings.streams_per_client,
        ),
        queue.keys.leases("address", address(request)): (
            "event streams and WebSockets open from this address",
            settings.streams_per_address,
        ),
    }
    return connection_lease(queue.redis, caps)


async def _renew(redis: RedisClient, keys: list[str], member: str) -> None:
    while True:
        await asyncio.sleep(LEASE_S / 3)
        with contextlib.suppress(Exception):  # a Redis outage: the lease may lapse, no harm
            for key in keys:
                await redis.eval(_LEASE, 1, key, member, 1 << 30, LEASE_S)
