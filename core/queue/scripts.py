"""Every Lua script of the queue, loaded one way: a generated header, the shared prelude, the body.

The header is where Python's names reach Lua: the doorbell command (`PUBLISH`, or `SPUBLISH` on a
Redis Cluster), the terminal states (job.py), the tallies' lifetimes, the audit's length and the
chunks' linger (keys.py), so that none is spelled twice.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from redis.commands.core import AsyncScript

from core.infra.redis_client import RedisClient
from core.queue.job import TERMINAL_NAMES
from core.queue.keys import (
    AUDIT_MAXLEN,
    CHUNKS_LINGER_S,
    THROUGHPUT_MINUTES_KEPT,
    USAGE_CLIENTS_PER_DAY,
    USAGE_DAYS_KEPT,
)

_FOLDER = resources.files("core.queue") / "lua"


def _header(sharded: bool) -> str:
    terminal = ", ".join(f"{name}=true" for name in TERMINAL_NAMES)
    return (
        f"local DOORBELL = '{'SPUBLISH' if sharded else 'PUBLISH'}'\n"
        f"local TERMINAL = {{{terminal}}}\n"
        f"local USAGE_KEEP_S = {(USAGE_DAYS_KEPT + 1) * 86_400}\n"
        f"local USAGE_CLIENTS = {USAGE_CLIENTS_PER_DAY}\n"
        f"local MINUTES_KEEP_S = {(THROUGHPUT_MINUTES_KEPT + 1) * 60}\n"
        f"local AUDIT_MAXLEN = {AUDIT_MAXLEN}\n"
        f"local CHUNKS_LINGER_S = {CHUNKS_LINGER_S}\n"
    )


@cache
def source(name: str, sharded: bool = False) -> str:
    """The full source of script `name` (lua/<name>.lua); `sharded`: for a Redis Cluster."""
    prelude = (_FOLDER / "_prelude.lua").read_text()
    return _header(sharded) + prelude + "\n" + (_FOLDER / f"{name}.lua").read_text()


def register(redis: RedisClient, name: str, sharded: bool = False) -> AsyncScript:
    """Script `name` registered on `redis` (EVALSHA, loaded again after a NOSCRIPT)."""
    return redis.register_script(source(name, sharded))
