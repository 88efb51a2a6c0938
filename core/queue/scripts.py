"""Every Lua script of the queue, loaded one way: a generated header, the shared prelude, the
script's named keys and arguments, its body; called one way, by those names; and the queue's own
held once per client (QueueScripts), for its clients' side and its workers' side.

The header is where Python's names reach Lua: the doorbell command (`PUBLISH`, or `SPUBLISH` on a
Redis Cluster), the terminal states (job.py), the tallies' lifetimes, the audit's length and the
chunks' linger. Every key name a script builds is `K.<name>(base, ...)` in its source, written
out at load time from keys.py's own definition, so that none is spelled twice. A script names its
keys and arguments on its first lines (`--- keys: jobs job` and `--- args: token now:n`, `:n` for
a number, `*rest` for the remaining ones as a list); they become its locals, and Python passes
them by those names.
"""

from __future__ import annotations

import inspect
import operator
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache, cached_property
from importlib import resources
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.exceptions import OutOfMemoryError, ResponseError

from core.infra.redis_client import RedisClient, parse_url
from core.infra.settings import Settings
from core.queue.durable import run_replicated
from core.queue.job import TERMINAL_NAMES
from core.queue.keys import (
    AUDIT_MAXLEN,
    CHUNKS_LINGER_S,
    PARTS_LINGER_S,
    THROUGHPUT_MINUTES_KEPT,
    USAGE_CLIENTS_PER_DAY,
    USAGE_DAYS_KEPT,
    Keys,
)
from core.queue.pipelined import Pipelined

_FOLDER = resources.files("core.queue") / "lua"
_MARK = "\x00"
# Keys' members that are not one key's name built from the queue's base.
_NOT_KEYS = frozenset({"base", "streams", "stream", "prefix", "queue"})


@dataclass(frozen=True)
class Signature:
    """A script's named keys and arguments, in the order Redis passes them."""

    keys: tuple[str, ...]
    args: tuple[str, ...]
    numbers: frozenset[str]  # arguments the script reads as numbers
    rest_keys: str | None = None  # the name of the keys after the named ones, as a list
    rest_args: str | None = None

    @classmethod
    def parse(cls, name: str, body: str) -> Signature:
        declared: dict[str, list[str]] = {"keys": [], "args": []}
        for line in body.splitlines():
            match = re.match(r"--- (keys|args):(.*)", line)
            if match:
                declared[match[1]] += match[2].split()
        rests: dict[str, str | None] = {"keys": None, "args": None}
        for kind, names in declared.items():
            if names and names[-1].startswith("*"):
                rests[kind] = names.pop()[1:]
        numbers = frozenset(n[:-2] for n in declared["args"] if n.endswith(":n"))
        args = tuple(n.removesuffix(":n") for n in declared["args"])
        every = [*declared["keys"], *args, *(r for r in rests.values() if r)]
        if len(set(every)) != len(every) or not all(n.isidentifier() for n in every):
            raise ValueError(f"lua/{name}.lua: its keys and arguments need distinct names")
        return cls(tuple(declared["keys"]), args, numbers, rests["keys"], rests["args"])

    def locals(self) -> str:
        """Lua declaring each name as a local, read from KEYS and ARGV."""
        lines = []
        if self.keys:
            values = ", ".join(f"KEYS[{i}]" for i in range(1, len(self.keys) + 1))
            lines.append(f"local {', '.join(self.keys)} = {values}")
        if self.args:
            values = ", ".join(
                f"tonumber(ARGV[{i}])" if name in self.numbers else f"ARGV[{i}]"
                for i, name in enumerate(self.args, 1)
            )
            lines.append(f"local {', '.join(self.args)} = {values}")
        for rest, table, first in (
            (self.rest_keys, "KEYS", len(self.keys) + 1),
            (self.rest_args, "ARGV", len(self.args) + 1),
        ):
            if rest:  # a loop, not unpack: a long list would overflow Lua's stack
                lines.append(f"local {rest} = {{}}")
                copy = f"{rest}[i - {first - 1}] = {table}[i]"
                lines.append(f"for i = {first}, #{table} do {copy} end")
        return "\n".join(lines) + "\n"

    @cached_property
    def _pick_keys(self) -> Callable[[Mapping[str, Any]], list[Any]]:
        return _picker((*self.keys, *([self.rest_keys] if self.rest_keys else [])))

    @cached_property
    def _pick_args(self) -> Callable[[Mapping[str, Any]], list[Any]]:
        return _picker((*self.args, *([self.rest_args] if self.rest_args else [])))

    def order(
        self, keys: Mapping[str, Any], args: Mapping[str, Any]
    ) -> tuple[list[Any], list[Any]]:
        """KEYS and ARGV for a call naming every key and argument (a rest as a list)."""
        expected_keys = len(self.keys) + (self.rest_keys is not None)
        expected_args = len(self.args) + (self.rest_args is not None)
        if len(keys) != expected_keys or len(args) != expected_args:
            raise TypeError(f"a script takes keys {self.keys} and arguments {self.args}")
        ordered_keys, ordered_args = self._pick_keys(keys), self._pick_args(args)
        if self.rest_keys:
            ordered_keys += ordered_keys.pop()
        if self.rest_args:
            ordered_args += ordered_args.pop()
        return ordered_keys, ordered_args


def _picker(names: tuple[str, ...]) -> Callable[[Mapping[str, Any]], list[Any]]:
    """The values of `names` in a mapping, in order: itemgetter, in C (a submission's path)."""
    if not names:
        return lambda _: []
    getter = operator.itemgetter(*names)
    if len(names) == 1:
        return lambda mapping: [getter(mapping)]
    return lambda mapping: list(getter(mapping))


class _Templates(Keys):
    """Keys whose base and arguments are markers: a key's definition, read back as Lua."""

    @property
    def base(self) -> str:
        return f"{_MARK}base{_MARK}"


def key_expression(name: str, arguments: list[str]) -> str:
    """Lua for `K.<name>(base, ...)` with `arguments` (Lua expressions, the base's first):
    keys.py's `Keys.<name>`, written out where the script calls it (no call at run time)."""
    member = getattr(Keys, name, None)
    if name in _NOT_KEYS or name.startswith("_") or member is None:
        raise ValueError(f"K.{name}: keys.py has no such key")
    templates = _Templates()
    if isinstance(member, property):
        params: list[str] = []
        built = getattr(templates, name)
    else:
        params = list(inspect.signature(member).parameters)[1:]
        built = getattr(templates, name)(*(f"{_MARK}{p}{_MARK}" for p in params))
    if len(arguments) != len(params) + 1:
        raise ValueError(f"K.{name} takes {['base', *params]}, not {len(arguments)} arguments")
    given = dict(zip(["base", *params], arguments, strict=True))
    pieces = built.split(_MARK)  # literal, name, literal, name, ..., literal
    assert all("'" not in p and "\\" not in p for p in pieces[::2])
    parts = [(f"'{p}'" if i % 2 == 0 else _operand(given[p])) for i, p in enumerate(pieces) if p]
    return f"({' .. '.join(parts)})"


def _operand(expression: str) -> str:
    simple = re.fullmatch(r"\w+|'[^']*'", expression)
    return expression if simple else f"({expression})"


def expand_keys(lua: str) -> str:
    """`lua` with every `K.<name>(...)` written out (key_expression)."""
    out, at = [], 0
    for match in re.finditer(r"\bK\.(\w+)\(", lua):
        if match.start() < at:
            continue  # inside a call already written out (its arguments were expanded)
        arguments, end = _arguments(lua, match.end())
        out += [lua[at : match.start()], key_expression(match[1], arguments)]
        at = end
    return "".join(out) + lua[at:]


def _arguments(lua: str, start: int) -> tuple[list[str], int]:
    """The comma-separated arguments of a call whose "(" ends before `start`, each expanded,
    and where the call ends. (Lua calls in our scripts hold no strings with parentheses.)"""
    depth, piece, pieces = 0, start, []
    for i in range(start, len(lua)):
        char = lua[i]
        if char in "({":
            depth += 1
        elif char in ")}" and depth:
            depth -= 1
        elif char == ")":
            pieces.append(lua[piece:i])
            return [expand_keys(p.strip()) for p in pieces if p.strip()], i + 1
        elif char == "," and not depth:
            pieces.append(lua[piece:i])
            piece = i + 1
    raise ValueError("a K call without its closing parenthesis")


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
        f"local PARTS_LINGER_S = {PARTS_LINGER_S}\n"
    )


def _read(name: str) -> str:
    return (_FOLDER / f"{name}.lua").read_text()


@cache
def signature(name: str) -> Signature:
    return Signature.parse(name, _read(name))


@cache
def source(name: str, sharded: bool = False) -> str:
    """The full source of script `name` (lua/<name>.lua); `sharded`: for a Redis Cluster."""
    prelude, body = _read("_prelude"), _read(name)
    functions = set(re.findall(r"local function (\w+)", prelude))
    clash = functions & {*signature(name).keys, *signature(name).args}
    if clash:  # a name declared after the prelude would hide its function from the body
        raise ValueError(f"lua/{name}.lua: {sorted(clash)} name functions of the prelude")
    lua = _header(sharded) + prelude + "\n" + signature(name).locals() + body
    return expand_keys(lua)


class Script:
    """One script on one Redis client, called with its keys and arguments by name (EVALSHA,
    loaded again after a NOSCRIPT)."""

    def __init__(self, redis: RedisClient, name: str, sharded: bool = False) -> None:
        self.name = name
        self.signature = signature(name)
        self.registered: AsyncScript = redis.register_script(source(name, sharded))

    async def __call__(self, keys: Mapping[str, Any], args: Mapping[str, Any]) -> Any:
        ordered_keys, ordered_args = self.signature.order(keys, args)
        return await self.registered(keys=ordered_keys, args=ordered_args)


# The scripts of the queue's own state changes (callbacks, limits, voices and retention load
# theirs beside their keys).
QUEUE_SCRIPTS = (
    "enqueue",
    "take",
    "position",
    "start",
    "renew",
    "remake",
    "progress",
    "chunk",
    "complete",
    "finish",
    "release",
    "cancel",
    "requeue",
)


class QueueScripts:
    """The queue's scripts on one client, shared by its clients' side and its workers' side:
    run one, or run one whose change a client is told of (confirmed by replicas first)."""

    def __init__(self, redis: RedisClient, settings: Settings) -> None:
        self.redis = redis
        self.settings = settings
        url = settings.redis.redis_url
        self.sharded = parse_url(url).sharded if url else False
        self.scripts = {name: Script(redis, name, self.sharded) for name in QUEUE_SCRIPTS}
        # One server's client: the submissions of one turn of the loop share a write.
        self._pipelined: Pipelined | None = None
        if isinstance(redis, Redis) and not redis.single_connection_client:
            self._pipelined = Pipelined(redis)
        self.ttl = settings.redis.job_ttl_s
        # The event streams' lengths, as the scripts that emit events take them.
        self.maxlens = {
            "maxlen_job": settings.redis.job_events_maxlen,
            "maxlen_client": settings.redis.client_events_maxlen,
        }

    def stamped(self, args: dict[str, Any]) -> dict[str, Any]:
        """`args` and what every script that writes a job's events takes too: the time, the event
        streams' lengths and the job's time to live."""
        return {**args, "now": time.time(), **self.maxlens, "ttl": self.ttl}

    async def run(self, name: str, keys: Mapping[str, Any], args: Mapping[str, Any]) -> Any:
        try:
            return await self.scripts[name](keys, args)
        except ResponseError as exc:
            # A write refused inside a script that had started (Redis at its maxmemory) comes
            # back as the script's error: the same wait as a refused command, not a crash.
            if "OOM command not allowed" in str(exc) and not isinstance(exc, OutOfMemoryError):
                raise OutOfMemoryError(str(exc)) from exc
            raise

    async def run_acknowledged(
        self, name: str, keys: Mapping[str, Any], args: Mapping[str, Any], *changed: str
    ) -> Any:
        """A change that a client is told has happened (a submission, a cancel): confirmed by
        CHATTTS_REDIS_MIN_REPLICAS replicas first (NotReplicated otherwise) when the script's
        verdict is one of `changed`."""
        script = self.scripts[name]
        ordered_keys, ordered_args = script.signature.order(keys, args)
        replicas = self.settings.redis.redis_min_replicas
        if replicas <= 0 and self._pipelined is not None:
            return await self._pipelined.run(script.registered, ordered_keys, ordered_args)
        return await run_replicated(
            self.redis,
            script.registered,
            ordered_keys,
            ordered_args,
            replicas,
            self.settings.redis.redis_replica_wait_ms,
            changed=lambda result: as_text(result[0]) in changed,
        )


def as_text(value: Any) -> str:
    """A value of a script's reply (bytes from Redis) as text."""
    return value.decode() if isinstance(value, bytes) else str(value)
