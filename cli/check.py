"""`chattts-online check`: print the settings (secrets masked), ping Redis, list live workers.

With `--live` or `--ready` it is a quiet probe for an orchestrator: one line, exit 0 or 1.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from pathlib import Path
from typing import Any

from redis.exceptions import RedisError

from cli.running import AmbiguousService, running
from core.infra.embedded_redis import running_url
from core.infra.redis_client import connect, mask_url, target_of
from core.infra.settings import ENV_PREFIX, SETTINGS, Settings
from core.infra.topology import report
from core.queue.store import Queue

# A probe answers within this, whatever state Redis is in (kubelet's default timeout is 1 s;
# probes set their own above it).
PROBE_TIMEOUT_S = 3.0
# A heartbeat older than this many periods is stale: one beat may be late, two may not.
STALE_PERIODS = 2.0


def masked_settings(settings: Settings) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in SETTINGS:
        value = settings.value(name)
        if name in ("api_keys", "admin_keys", "key_weights") and value:
            value = f"*** ({len([k for k in value.split(',') if k.strip()])} keys)"
        elif name == "redis_url" and value:
            value = mask_url(value)
        elif ("secret" in name or "password" in name or name.endswith("_key")) and value:
            value = "***"
        out[name] = value
    return out


def _engine_line(settings: Settings) -> tuple[bool, str]:
    try:
        from workers.engines import create_engine

        engine = create_engine(settings)
    except Exception as exc:
        return False, f"engine: {settings.engine.name!r} cannot be used here: {exc}"
    return True, f"engine: {settings.engine.name!r} -> {engine.name} (a worker here would use it)"


async def _probe(settings: Settings) -> bool:
    client = connect(settings)
    try:
        start = time.perf_counter()
        await client.ping()
        latency_ms = (time.perf_counter() - start) * 1000
        queue = Queue(client, settings)
        info: Any = await client.info("server", **await target_of(client, queue.keys.jobs))
        print(f"redis: ok, version {info.get('redis_version')}, ping {latency_ms:.1f} ms")
        print(f"redis topology: {_topology_line(await report(client, queue.keys.jobs), settings)}")
        print(f"queue {settings.redis.queue!r}: {await queue.depth()} entries in {queue.keys.jobs}")
        live = await queue.fleet.heartbeats(loading=True)
        print(f"workers: {len(live)} alive")
        for beat in live:
            print(
                f"  {beat.get('name')}: engine {beat.get('engine')} {beat.get('model_version')}, "
                f"{len(beat.get('voices') or [])} voices, {beat.get('jobs_succeeded', 0)} jobs done"
            )
        if not live:
            print("  (none: start one with `chattts-online worker`)")
        return True
    except RedisError as exc:
        print(f"redis: UNREACHABLE at {mask_url(settings.redis.redis_url or '')}: {exc}")
        return False
    finally:
        await client.aclose()


def _topology_line(topology: dict[str, Any], settings: Settings) -> str:
    """One line: shape, the queue's primary, replicas in sync (and required), slot coverage."""
    line = f"{topology['shape']}, the queue's primary {topology['primary']}"
    line += f", {topology['replicas_in_sync']} replica(s) in sync"
    if settings.redis.redis_min_replicas:
        line += f" ({settings.redis.redis_min_replicas} required)"
    if topology["shape"] == "cluster":
        line += f", {topology['masters']} masters, {topology['slots_ok']}/16384 slots served"
        line += f" (cluster_state {topology['cluster_state']})"
    return line


async def _heartbeats(queue: Queue, name: str | None) -> list[dict[str, Any]]:
    """The heartbeat of worker `name`, or of every worker on this host when `name` is None."""
    if name is not None:
        beat = await queue.fleet.heartbeat(name)
        return [beat] if beat is not None else []
    host = socket.gethostname()
    found = await queue.fleet.heartbeats(loading=True)
    return [b for b in found if b.get("host", str(b.get("name", "")).rsplit("-", 1)[0]) == host]


async def _probe_quietly(settings: Settings, live: bool, name: str | None) -> tuple[bool, str]:
    client = connect(settings)
    try:
        async with asyncio.timeout(PROBE_TIMEOUT_S):
            if not live:
                topology = await report(client, Queue(client, settings).keys.jobs)
                line = _topology_line(topology, settings)
                if topology["replicas_in_sync"] < settings.redis.redis_min_replicas:
                    return False, f"not ready: too few replicas in sync: {line}"
                if topology["shape"] == "cluster" and not topology["slots_covered"]:
                    return False, f"not ready: the cluster does not serve every slot: {line}"
                return True, f"ready: Redis answers ({line})"
            await client.ping()
            beats = await _heartbeats(Queue(client, settings), name)
    except (RedisError, OSError, TimeoutError) as exc:
        where = mask_url(settings.redis.redis_url or "")
        if live:
            # A liveness probe that failed here would restart every worker during a Redis
            # outage (each reloading its model); the worker rides it out itself. Readiness
            # says the outage.
            return True, f"live (cannot tell: Redis unreachable at {where}: {exc!r})"
        return False, f"Redis unreachable at {where}: {exc!r}"
    finally:
        await client.aclose()
    who = f"worker {name!r}" if name else f"any worker on host {socket.gethostname()!r}"
    if not beats:
        return False, f"not live: no heartbeat of {who}"
    newest = max(float(b.get("ts", 0.0)) for b in beats)
    age = time.time() - newest
    if age > STALE_PERIODS * settings.worker.heartbeat_s:
        return False, f"not live: the heartbeat of {who} is {age:.1f} s old (stale)"
    return True, f"live: {who} beat {age:.1f} s ago"


def probe(settings: Settings, live: bool, worker_name: str | None = None) -> int:
    """`--live` (this worker's heartbeat is fresh) or `--ready` (Redis answers): 0 or 1."""
    if not settings.redis.redis_url:
        print("not ready: no Redis URL configured (CHATTTS_REDIS_URL)")
        return 1
    ok, line = asyncio.run(_probe_quietly(settings, live, worker_name))
    print(line)
    return 0 if ok else 1


def main(settings: Settings, live: bool = False, ready: bool = False, named: bool = False) -> int:
    """0 when Redis answers and the engine can be created, else 1 (`live`/`ready`: a probe).

    `named`: the worker's name was given on the command line (else only the environment names
    one; without either, `live` looks for any worker of this host).
    """
    try:
        service = running()
    except AmbiguousService as exc:
        print(f"service: {exc}")
        service = None
    shown = masked_settings(settings)
    origin = f"this shell's environment variables {ENV_PREFIX}<NAME>"
    if not settings.redis.redis_url:  # `run`'s embedded Redis: in this data directory, or
        # in the one the running `run` announced (from any directory)
        data_dirs = [settings.data_dir, *([service.data_dir] if service else [])]
        for data_dir in data_dirs:
            found = running_url(Path(data_dir) / "redis")
            if found is not None:
                print(f"redis: the embedded Redis of `chattts-online run` in {data_dir}")
                settings = settings.replace(redis_url=found, data_dir=data_dir)
                break
        if service is not None and Path(settings.data_dir).resolve() == Path(service.data_dir):
            shown = service.settings
            origin = f"the running service's, at {service.url} (pid {service.pid}), masked"
    if live or ready:
        named = named or os.environ.get(ENV_PREFIX + "WORKER_NAME") is not None
        return probe(settings, live, settings.worker.worker_name if named else None)
    print(f"settings ({origin}):")
    for name, value in shown.items():
        print(f"  {name} = {value!r}")
    engine_ok, line = _engine_line(settings)
    print(line)
    if not settings.redis.redis_url:
        print(
            "redis: no service is running here (`chattts-online run` starts one, with its own "
            f"Redis), and no {ENV_PREFIX}REDIS_URL names another; --data-dir names the data "
            "directory of a `run` elsewhere"
        )
        return 1
    redis_ok = asyncio.run(_probe(settings))
    return 0 if redis_ok and engine_ok else 1
