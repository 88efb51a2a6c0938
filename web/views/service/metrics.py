"""`/metrics`: the process's Prometheus registry, with the queue's figures read at scrape time."""

from __future__ import annotations

import asyncio
import contextlib

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from redis.exceptions import RedisError

from web.appkeys import METRICS, QUEUE, THROUGHPUT
from web.clients.identity import from_operators_network
from web.errors import ApiError
from web.monitors.queue_metrics import read_queue

SCRAPE_REDIS_TIMEOUT_S = 0.5


async def metrics_view(request: web.Request) -> web.Response:
    if not from_operators_network(request):
        raise ApiError(
            403,
            "/metrics answers the networks in CHATTTS_METRICS_NETWORKS (loopback and private "
            "ranges unless set); scrape from one of them, or add the scraper's network",
            code="metrics_not_public",
        )
    metrics = request.app[METRICS]
    queue = request.app[QUEUE]
    meter = request.app.get(THROUGHPUT)
    metrics.queue.alert = meter.alert if meter is not None else None
    # The scrape still answers, at once even with Redis hung; the values keep theirs.
    with contextlib.suppress(RedisError, TimeoutError):
        async with asyncio.timeout(SCRAPE_REDIS_TIMEOUT_S):
            metrics.queue.reading = await read_queue(queue)
    return web.Response(
        body=generate_latest(metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
    )
