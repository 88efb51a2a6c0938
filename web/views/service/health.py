"""Probes: `/healthz` (the process answers) and `/readyz` (Redis answers and a worker is alive;
with the topology: the queue's primary, its replicas in sync, a cluster's slot coverage; the
detail only to CHATTTS_METRICS_NETWORKS)."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web
from redis.exceptions import RedisError

from web.appkeys import HUB, QUEUE, SETTINGS, THROUGHPUT
from web.clients.identity import from_operators_network
from web.errors import json_response
from web.schemas.answers import Health, Readiness

READY_TIMEOUT_S = 2.0


async def healthz(request: web.Request) -> web.Response:
    health: Health = {"status": "ok"}
    return json_response(health)


async def readyz(request: web.Request) -> web.Response:
    redis_ok, workers, loading = False, 0, 0
    topology: dict[str, Any] | None = None
    streams: dict[str, int] | None = None
    meter = request.app.get(THROUGHPUT)
    queue = request.app[QUEUE]
    try:
        if meter is not None and meter.store_down:
            raise TimeoutError  # known down: say so at once
        async with asyncio.timeout(READY_TIMEOUT_S):
            topology = await queue.readings.topology()
            redis_ok = True
            beats = await queue.fleet.heartbeats(loading=True)
            loading = sum(1 for beat in beats if beat.get("state") == "loading")
            workers = len(beats) - loading
            streams = (await queue.readings.streams(beats)).public()
    except (RedisError, TimeoutError, OSError):
        pass
    wanted = request.app[SETTINGS].redis.redis_min_replicas
    durable = topology is None or topology["replicas_in_sync"] >= wanted
    if topology is not None:
        topology["replicas_required"] = wanted
    ready = redis_ok and workers > 0 and durable
    status = 200 if ready else 503
    if not from_operators_network(request):
        # A load balancer's check from a public range gets its answer, not the fleet's layout.
        brief: Readiness = {"status": "ready" if ready else "not_ready"}
        return json_response(brief, status=status)
    body: Readiness = {
        "status": "ready" if ready else "not_ready",
        "redis": redis_ok,
        "workers": workers,  # ready ones: a worker still loading its model is not counted
        "workers_loading": loading,
        "events": request.app[HUB].connected.is_set(),
        "topology": topology,
        "streams": streams,
    }
    if meter is not None:
        body["backlog"] = meter.alert.detail()
    return json_response(body, status=status)
