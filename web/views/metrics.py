"""The request middleware that feeds the process's metrics, and `/metrics` itself."""

from __future__ import annotations

import asyncio
import contextlib
import time

from aiohttp import web
from aiohttp.typedefs import Handler
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from redis.exceptions import RedisError

from web.appkeys import METRICS, QUEUE, THROUGHPUT
from web.cluster_metrics import read_queue

# Long-lived connections, and requests that wait for synthesis: counted, but their duration is
# not the web tier's latency.
STREAMING_ROUTES = frozenset({"job_events", "client_events", "ws", "openai_speech"})
# Any token is a method to the HTTP parser: labels stay bounded whatever clients send.
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
SCRAPE_REDIS_TIMEOUT_S = 0.5
# The client went away before the answer (its handler was cancelled): nginx's "499", not a 500.
CLIENT_GONE = 499


def _route_name(request: web.Request) -> str:
    route = request.match_info.route
    name = route.name or (route.resource.name if route.resource is not None else None)
    return name or "unmatched"


@web.middleware
async def metrics_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    start = time.perf_counter()
    status = 500
    try:
        response = await handler(request)
        status = response.status
        return response
    except web.HTTPException as exc:
        status = exc.status
        raise
    except asyncio.CancelledError:
        status = CLIENT_GONE
        raise
    finally:
        metrics = request.app[METRICS]
        route = _route_name(request)
        method = request.method if request.method in _METHODS else "OTHER"
        metrics.requests.labels(route, method, str(status)).inc()
        if route not in STREAMING_ROUTES:
            metrics.latency.labels(route).observe(time.perf_counter() - start)


async def metrics_view(request: web.Request) -> web.Response:
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
