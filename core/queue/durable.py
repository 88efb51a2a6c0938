"""Writes acknowledged only once replicas hold them: a script and Redis `WAIT` on one connection.

Redis replicates asynchronously: a primary that dies right after a write can take it along, and
the replica promoted in its place never saw it. `WAIT n ms` blocks until `n` replicas acknowledged
every earlier write *of the same connection*, so the script and the WAIT travel in one pipeline
(one connection; in a cluster, the connection to the slot's primary).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError

from core.infra.redis_client import RedisClient, target_of


class NotReplicated(Exception):
    """The primary applied a write that too few replicas acknowledged in time."""

    def __init__(self, wanted: int, acked: int, timeout_ms: int) -> None:
        super().__init__(
            f"Redis copied the write to {acked} of the {wanted} replicas required "
            f"(CHATTTS_REDIS_MIN_REPLICAS) within {timeout_ms} ms: it might not survive a "
            "failover"
        )


async def run_replicated(
    redis: RedisClient,
    script: AsyncScript,
    keys: list[str],
    args: list[Any],
    replicas: int,
    timeout_ms: int,
    changed: Callable[[Any], bool] = bool,
) -> Any:
    """The script's result, once `replicas` replicas acknowledged its writes (NotReplicated
    otherwise: the write stands on the primary, unconfirmed). A result for which `changed` is
    false (a refusal that wrote nothing) needs no acknowledgement."""
    if replicas <= 0:
        return await script(keys=keys, args=args)
    target = await target_of(redis, keys[0])
    for attempt in range(2):
        async with redis.pipeline(transaction=False) as pipe:
            # execute_command: redis-py's cluster pipeline refuses its evalsha() method, not
            # the command itself, which goes to the keys' slot like any other.
            pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
            pipe.execute_command("WAIT", replicas, timeout_ms, **target)
            result, acked = await pipe.execute(raise_on_error=False)
        if isinstance(result, NoScriptError) and attempt == 0:
            # A new primary (failover, restart) has no scripts cached yet: load it, once.
            await redis.script_load(script.script)
            continue
        if isinstance(result, Exception):
            raise result
        if isinstance(acked, Exception):
            raise acked
        if int(acked) < replicas and changed(result):
            raise NotReplicated(replicas, int(acked), timeout_ms)
        return result
    raise AssertionError("unreachable")  # pragma: no cover
