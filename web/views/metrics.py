"""Prometheus metrics of one web process: its own registry, the request middleware, `/metrics`."""

from __future__ import annotations

import asyncio
import contextlib
import time

from aiohttp import web
from aiohttp.typedefs import Handler
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from redis.exceptions import RedisError

from ..appkeys import METRICS, QUEUE, THROUGHPUT
from ..cluster_metrics import QueueCollector, read_queue

# Long-lived connections, and requests that wait for synthesis: counted, but their duration is
# not the web tier's latency.
STREAMING_ROUTES = frozenset({"job_events", "client_events", "ws", "openai_speech"})
# Any token is a method to the HTTP parser: labels stay bounded whatever clients send.
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
SCRAPE_REDIS_TIMEOUT_S = 0.5
# The client went away before the answer (its handler was cancelled): nginx's "499", not a 500.
CLIENT_GONE = 499


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.queue = QueueCollector()
        r.register(self.queue)
        self.requests = Counter(
            "chattts_http_requests", "HTTP requests", ["route", "method", "status"], registry=r
        )
        self.latency = Histogram(
            "chattts_http_request_duration_seconds",
            "Time to answer an HTTP request (streams excluded)",
            ["route"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
            registry=r,
        )
        self.sse_open = Gauge("chattts_sse_connections", "Open SSE streams", registry=r)
        self.ws_open = Gauge("chattts_websocket_connections", "Open WebSockets", registry=r)
        self.jobs_submitted = Counter(
            "chattts_jobs_submitted", "Jobs accepted by this process", registry=r
        )
        self.hub_reconnects = Counter(
            "chattts_hub_reconnects", "Pub/sub reconnections of the event hub", registry=r
        )
        self.events_sent = Counter(
            "chattts_events_sent",
            "Job events written to SSE streams and WebSockets",
            ["transport"],
            registry=r,
        )
        self.events_replayed = Counter(
            "chattts_events_replayed",
            "Events sent that were older than their connection (a resume or a late subscribe)",
            ["transport"],
            registry=r,
        )
        self.redis_errors = Counter(
            "chattts_redis_errors",
            "Requests answered 503 because Redis failed or was known to be down",
            registry=r,
        )

        for transport in ("sse", "ws"):  # both series exist (at 0) before the first event
            self.events_sent.labels(transport)
            self.events_replayed.labels(transport)

    def event_sent(self, transport: str, stream_id: str, since_ms: int) -> None:
        """Count one event; it is a replay when its stream id predates the connection."""
        self.events_sent.labels(transport).inc()
        if int(stream_id.split("-", 1)[0]) < since_ms:
            self.events_replayed.labels(transport).inc()


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
