"""Redis client construction shared by web and worker processes."""

from __future__ import annotations

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .settings import Settings

# Commands fail fast while Redis is down (the web tier answers 503, workers back off and retry
# in their own loops) instead of hanging a request on a long reconnect schedule.
_CONNECT_TIMEOUT_S = 2.0
_RETRIES = 1
# The errors that mean Redis is unreachable (down, partitioned, hung), not that a command was wrong.
REDIS_DOWN = (RedisConnectionError, RedisTimeoutError)


def connect(settings: Settings, *, block_ms: int = 0, max_connections: int | None = None) -> Redis:
    """A client whose socket timeout outlasts any XREADGROUP BLOCK it will issue."""
    if not settings.redis_url:
        raise RuntimeError("no Redis URL: set CHATTTS_REDIS_URL (or use `chattts-online run`)")
    socket_timeout = max(5.0, block_ms / 1000 + 3.0)
    client: Redis = Redis.from_url(
        settings.redis_url,
        socket_timeout=socket_timeout,
        socket_connect_timeout=_CONNECT_TIMEOUT_S,
        retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), _RETRIES),
        health_check_interval=15,
        max_connections=max_connections,
        decode_responses=False,
    )
    return client
