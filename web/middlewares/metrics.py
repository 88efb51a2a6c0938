"""The request middleware that feeds the process's request metrics (counts by route, latency)."""

from __future__ import annotations

import asyncio
import time

from aiohttp import web
from aiohttp.typedefs import Handler

from web.appkeys import METRICS

# Long-lived connections, and requests that wait for synthesis: counted, but their duration is
# not the web tier's latency.
STREAMING_ROUTES = frozenset({"job_events", "client_events", "ws", "openai_speech"})
# Any token is a method to the HTTP parser: labels stay bounded whatever clients send.
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
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
