"""The Prometheus registry of one web process: HTTP, SSE/WebSocket and event counters."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from web.monitors.queue_metrics import QueueCollector


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
        self.callbacks = Counter(
            "chattts_callback_attempts",
            "Callback attempts made by this process, by outcome (delivered, retry, failed)",
            ["outcome"],
            registry=r,
        )

        for outcome in ("delivered", "retry", "failed"):
            self.callbacks.labels(outcome)
        for transport in ("sse", "ws"):  # both series exist (at 0) before the first event
            self.events_sent.labels(transport)
            self.events_replayed.labels(transport)

    def event_sent(self, transport: str, stream_id: str, since_ms: int) -> None:
        """Count one event; it is a replay when its stream id predates the connection."""
        self.events_sent.labels(transport).inc()
        if int(stream_id.split("-", 1)[0]) < since_ms:
            self.events_replayed.labels(transport).inc()
