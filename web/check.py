"""`chattts-online check`: print the settings (secrets masked), ping Redis, list live workers."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import orjson
from redis.exceptions import RedisError

from workers.queue import Queue
from workers.redis_client import connect
from workers.settings import ENV_PREFIX, Settings


def mask_url(url: str) -> str:
    """The URL with its password (if any) replaced by ***."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}{port}"))


def masked_settings(settings: Settings) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field in dataclasses.fields(settings):
        value = getattr(settings, field.name)
        if field.name == "api_keys":
            value = f"*** ({len(settings.api_key_set)} keys)" if settings.api_key_set else ""
        elif field.name == "redis_url" and value:
            value = mask_url(value)
        out[field.name] = value
    return out


def _engine_line(settings: Settings) -> tuple[bool, str]:
    try:
        from workers.engines import create_engine

        engine = create_engine(settings)
    except Exception as exc:
        return False, f"engine: {settings.engine!r} cannot be used here: {exc}"
    return True, f"engine: {settings.engine!r} -> {engine.name} (a worker here would use it)"


async def _probe(settings: Settings) -> bool:
    client = connect(settings)
    try:
        start = time.perf_counter()
        await client.ping()
        latency_ms = (time.perf_counter() - start) * 1000
        info: Any = await client.info("server")
        print(f"redis: ok, version {info.get('redis_version')}, ping {latency_ms:.1f} ms")
        queue = Queue(client, settings)
        print(f"queue {settings.queue!r}: {await queue.depth()} entries in {queue.keys.jobs}")
        names: Any = await client.zrange(queue.keys.workers, 0, -1)
        beats: Any = (
            await client.mget([queue.keys.worker(n.decode()) for n in names]) if names else []
        )
        live = [orjson.loads(b) for b in beats if b is not None]
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
        print(f"redis: UNREACHABLE at {mask_url(settings.redis_url or '')}: {exc}")
        return False
    finally:
        await client.aclose()


def main(settings: Settings) -> int:
    """0 when Redis answers and the engine can be created, else 1."""
    print(f"settings (environment variables {ENV_PREFIX}<NAME>):")
    for name, value in masked_settings(settings).items():
        print(f"  {name} = {value!r}")
    engine_ok, line = _engine_line(settings)
    print(line)
    if not settings.redis_url:
        print("redis: no URL configured (CHATTTS_REDIS_URL); `chattts-online run` starts one")
        return 1
    redis_ok = asyncio.run(_probe(settings))
    return 0 if redis_ok and engine_ok else 1
