"""Probes: `/healthz` (the process answers) and `/readyz` (Redis answers and a worker is alive)."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web
from redis.exceptions import RedisError

from web.appkeys import HUB, QUEUE, THROUGHPUT
from web.errors import json_response

from .voices import live_workers

READY_TIMEOUT_S = 2.0


async def healthz(request: web.Request) -> web.Response:
    return json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    redis_ok, workers = False, 0
    meter = request.app.get(THROUGHPUT)
    try:
        if meter is not None and meter.store_down:
            raise TimeoutError  # known down: say so at once
        async with asyncio.timeout(READY_TIMEOUT_S):
            await request.app[QUEUE].redis.ping()
            redis_ok = True
            workers = len(await live_workers(request))
    except (RedisError, TimeoutError, OSError):
        pass
    ready = redis_ok and workers > 0
    body: dict[str, Any] = {
        "status": "ready" if ready else "not_ready",
        "redis": redis_ok,
        "workers": workers,
        "events": request.app[HUB].connected.is_set(),
    }
    if meter is not None:
        body["backlog"] = meter.alert.detail()
    return json_response(body, status=200 if ready else 503)
