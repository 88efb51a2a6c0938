"""Every Redis client of the service is built here, for the three shapes a deployment takes.

`CHATTTS_REDIS_URL` names one of them:

- `redis://[[user]:password@]host[:port][/db]`, `rediss://...` (TLS), `unix://...`: one server;
- `redis+sentinel://[[user]:password@]host:port[,host:port...]/master[/db]` (`rediss+sentinel`
  for TLS): the primary that the sentinels name, followed across failovers;
- `redis+cluster://[[user]:password@]host:port[,host:port...]` (`rediss+cluster`): a Redis
  Cluster, found from any of the nodes given.

Each is redis-py's own client (`Redis`, `Sentinel.master_for`, `RedisCluster`); this module only
parses the URL (redis-py has no URL form for the last two) and sets the timeouts. The password in
the URL is the data nodes'; sentinels that have their own take `CHATTTS_REDIS_SENTINEL_PASSWORD`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeAlias
from urllib.parse import parse_qsl, unquote, urlencode, urlunsplit

import redis
from redis.asyncio import Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import OutOfMemoryError
from redis.exceptions import TimeoutError as RedisTimeoutError

from core.infra.settings import Settings

# Commands fail fast while Redis is down (the web tier answers 503, workers back off and retry
# in their own loops) instead of hanging a request on a long reconnect schedule.
_CONNECT_TIMEOUT_S = 2.0
_RETRIES = 1
# A sentinel answers "who is the primary" from memory: a silent one is skipped quickly for the
# next, so that finding the new primary after a failover takes a fraction of a second.
_SENTINEL_TIMEOUT_S = 0.5
# The errors that mean Redis is unreachable (down, partitioned, hung), not that a command was wrong.
REDIS_DOWN = (RedisConnectionError, RedisTimeoutError)
# ... or that it cannot take a write now (at its maxmemory, noeviction): a worker waits either
# out, never crashes on it (the web tier answers 503 store_full meanwhile).
REDIS_UNAVAILABLE = (*REDIS_DOWN, OutOfMemoryError)
DEFAULT_PORT = 6379
DEFAULT_SENTINEL_PORT = 26379

# Redis or RedisCluster: both carry the same command methods, pipelines and scripts.
RedisClient: TypeAlias = Redis | RedisCluster
Shape = Literal["single", "sentinel", "cluster"]


@dataclass(frozen=True)
class Topology:
    """What a Redis URL names: one server, a primary behind sentinels, or a cluster."""

    shape: Shape
    url: str  # single: the URL itself; else a redis:// URL of the data nodes' credentials
    nodes: tuple[tuple[str, int], ...] = ()  # the sentinels, or the cluster's seed nodes
    master: str = ""  # the sentinels' name of the primary
    db: int = 0
    username: str | None = None
    password: str | None = None
    tls: bool = False

    @property
    def credentials(self) -> dict[str, Any]:
        """The data nodes' username, password and TLS, as redis-py's clients take them."""
        return {"username": self.username, "password": self.password, "ssl": self.tls}

    @property
    def sharded(self) -> bool:
        """Doorbells travel by sharded pub/sub (SPUBLISH): only the queue's shard carries them."""
        return self.shape == "cluster"


def parse_url(url: str) -> Topology:
    """The topology a Redis URL names; ValueError says what is wrong with it."""
    raw_scheme, netloc, path_text, query = _split_url(url)
    scheme = raw_scheme.lower()
    base, _, mode = scheme.partition("+")
    if base not in ("redis", "rediss", "unix") or mode not in ("", "sentinel", "cluster"):
        raise ValueError(
            f"unsupported Redis URL scheme {raw_scheme!r}: use redis://, rediss://, unix://, "
            "redis+sentinel://, rediss+sentinel://, redis+cluster:// or rediss+cluster://"
        )
    if not mode:
        return Topology("single", url)
    if base == "unix":
        raise ValueError(f"{scheme}:// is not a thing: sentinels and clusters are reached by TCP")
    credentials, _, hosts = netloc.rpartition("@")
    username, _, password = credentials.partition(":")
    nodes = tuple(
        _host_port(h, DEFAULT_SENTINEL_PORT if mode == "sentinel" else DEFAULT_PORT)
        for h in hosts.split(",")
    )
    path = [p for p in path_text.split("/") if p]
    master, db = "", 0
    if mode == "sentinel":
        if not path:
            raise ValueError(f"{scheme} URL without a master name: {scheme}://host:port/mymaster")
        master = unquote(path[0])
        db = _db(path[1]) if len(path) > 1 else 0
    elif path:
        raise ValueError("a cluster URL has no path: a Redis Cluster has database 0 only")
    auth = f"{credentials}@" if credentials else ""
    data_url = urlunsplit((base, f"{auth}{nodes[0][0]}:{nodes[0][1]}", f"/{db}", query, ""))
    return Topology(
        shape=mode,  # type: ignore[arg-type]
        url=data_url,
        nodes=nodes,
        master=master,
        db=db,
        username=unquote(username) or None,
        password=unquote(password) if password else None,
        tls=base == "rediss",
    )


def _split_url(url: str) -> tuple[str, str, str, str]:
    """(scheme, hosts, path, query) of a URL, split by hand rather than by urlsplit: a list of
    hosts with an IPv6 one in brackets ("s1,[::1]:26380") is no URL netloc, and some Python
    releases refuse it as one."""
    scheme, _, rest = url.partition("://")
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    netloc, rest = rest[:end], rest[end:]
    rest = rest.partition("#")[0]
    path, _, query = rest.partition("?")
    return scheme, netloc, path, query


def _host_port(text: str, default_port: int) -> tuple[str, int]:
    text = text.strip()
    if not text:
        raise ValueError("a Redis URL lists an empty host")
    if text.startswith("["):  # [::1]:26379
        host, _, rest = text[1:].partition("]")
        port = rest.lstrip(":")
    else:
        host, _, port = text.rpartition(":") if ":" in text else (text, "", "")
    try:
        return host, int(port) if port else default_port
    except ValueError:
        raise ValueError(f"invalid port in Redis URL host {text!r}") from None


def _db(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"invalid database number {text!r} in the Redis URL") from None


def connect(
    settings: Settings,
    *,
    block_ms: int = 0,
    max_connections: int | None = None,
    retries: int = _RETRIES,
    **options: Any,
) -> RedisClient:
    """A client for the configured topology whose socket timeout outlasts any XREADGROUP BLOCK
    it will issue. `retries` 0: no hidden reconnects (the event hub must notice each one)."""
    if not settings.redis.redis_url:
        raise RuntimeError("no Redis URL: set CHATTTS_REDIS_URL (or use `chattts-online run`)")
    topology = parse_url(settings.redis.redis_url)
    socket_timeout = max(5.0, block_ms / 1000 + 3.0)
    kwargs: dict[str, Any] = {
        "socket_timeout": socket_timeout,
        "socket_connect_timeout": _CONNECT_TIMEOUT_S,
        "retry": Retry(ExponentialBackoff(cap=0.5, base=0.05), retries),
        "health_check_interval": 15,
        "decode_responses": False,
        **options,
    }
    if topology.shape == "single":
        client: RedisClient = Redis.from_url(
            topology.url, max_connections=max_connections, **kwargs
        )
        return client
    if topology.shape == "cluster":
        # The cluster client follows MOVED and a node's failure on its own; keep the rest of
        # the schedule as short as for one server.
        kwargs.pop("health_check_interval", None)
        kwargs["retry"] = Retry(ExponentialBackoff(cap=0.5, base=0.05), max(1, retries))
        cluster: RedisCluster = RedisCluster(
            startup_nodes=[ClusterNode(host, port) for host, port in topology.nodes],
            **topology.credentials,
            max_connections=max_connections or 2**31,
            **kwargs,
        )
        return cluster
    sentinel = Sentinel(  # type: ignore[no-untyped-call, unused-ignore]  # typed from redis 8.2
        list(topology.nodes),
        sentinel_kwargs={
            "password": settings.redis.redis_sentinel_password or None,
            "socket_timeout": _SENTINEL_TIMEOUT_S,
            "socket_connect_timeout": _SENTINEL_TIMEOUT_S,
            "ssl": topology.tls,
        },
        db=topology.db,
        **topology.credentials,
    )
    primary: Redis = sentinel.master_for(topology.master, max_connections=max_connections, **kwargs)
    return primary


def connect_sync(url: str, **options: Any) -> redis.Redis | redis.RedisCluster:
    """A blocking client for the same URL forms (tools, tests, benchmarks)."""
    topology = parse_url(url)
    if topology.shape == "single":
        return redis.Redis.from_url(url, **options)
    if topology.shape == "cluster":
        return redis.RedisCluster(
            startup_nodes=[
                redis.cluster.ClusterNode(h, p)  # type: ignore[no-untyped-call, unused-ignore]
                for h, p in topology.nodes
            ],
            **topology.credentials,
            **options,
        )
    sentinel = redis.Sentinel(  # type: ignore[no-untyped-call, unused-ignore]
        list(topology.nodes),
        db=topology.db,
        **topology.credentials,
    )
    primary: redis.Redis = sentinel.master_for(topology.master, **options)  # type: ignore[no-untyped-call, unused-ignore]
    return primary


async def target_of(client: RedisClient, key: str) -> dict[str, Any]:
    """Keyword arguments that send a keyless command (INFO, WAIT, CLUSTER INFO) to the node
    that holds `key`: nothing for one server, the slot's primary in a cluster."""
    if isinstance(client, RedisCluster):
        await client.initialize()  # the slots map, on first use (a no-op afterwards)
        return {"target_nodes": client.get_node_from_key(key)}
    return {}


def mask_url(url: str) -> str:
    """The URL with its password (in the authority or the query) replaced by ***."""
    if "://" not in url:
        return url
    scheme, netloc, path, query = _split_url(url)
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        masked = [(k, "***" if k.lower() in _SECRET_PARAMS else v) for k, v in pairs]
        query = urlencode(masked, safe="*")
    credentials, at, hosts = netloc.rpartition("@")
    if at and ":" in credentials:
        netloc = f"{credentials.partition(':')[0]}:***@{hosts}"
    return f"{scheme}://{netloc}{path}" + (f"?{query}" if query else "")


# Query parameters that carry a secret (redis-py reads ?password=; others use the rest).
_SECRET_PARAMS = frozenset({"password", "pass", "passwd", "secret", "token", "key"})
