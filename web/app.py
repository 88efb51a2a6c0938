"""The aiohttp application: factory, lifecycle (Redis, event hub, open streams) and `main`."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp_jinja2
import jinja2
from aiohttp import web

from core.audio.isolated import CodecProcess
from core.infra.ports import PORT_IN_USE_EXIT, port_in_use_message, port_taken
from core.infra.redis_client import connect
from core.infra.settings import Settings
from core.queue.store import Queue
from web.appkeys import (
    CALLBACK_SECRET,
    CODECS,
    CONNECTIONS,
    COOKIE_SECRET,
    DERIVED,
    EGRESS,
    ENCODING,
    HUB,
    KEY_SHARES,
    MEMORY,
    METRICS,
    QUEUE,
    SETTINGS,
    SUSPECTS,
    THROUGHPUT,
)
from web.callbacks.sender import CallbackSender
from web.callbacks.signing import service_secret
from web.clients.identity import (
    cookie_secret,
    identity_middleware,
    key_shares,
    set_client_cookie,
)
from web.clients.key_guesses import key_guesses_middleware
from web.derived import DerivedFiles
from web.hub import Connections, EventHub
from web.listener import (
    AcceptFailures,
    ConnectionCounter,
    GuardedServer,
    raise_descriptor_limit,
)
from web.metrics import Metrics
from web.middlewares.access_log import JobAccessLogger, quiet_malformed_requests
from web.middlewares.cors import cors_headers, cors_middleware
from web.middlewares.error_handling import error_middleware, json_error_bodies
from web.middlewares.forwarded import forwarded_middleware
from web.middlewares.metrics import metrics_middleware
from web.middlewares.origin import origin_middleware
from web.monitors.backlog import BacklogAlert
from web.monitors.egress import EgressPacer
from web.monitors.memory import MemoryBudget
from web.monitors.store import ThroughputMeter
from web.routes import setup_routes

log = logging.getLogger("chattts_online.web")

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES_DIR = ROOT / "templates"
STATIC_DIR = ROOT / "static"
# Open streams are closed at once on shutdown; this bounds the wait for ordinary requests.
SHUTDOWN_TIMEOUT_S = 10.0
# An address may send a second's worth at once: a short file goes out unpaced.
SEND_BURST_S = 1.0
# Bytes of derived files (subtitles, captions' words, the API document) one process keeps.
DERIVED_FILES_BYTES = 64 * 1024**2
# redis-py's pool fails (not waits) past its size, 100 by default: hundreds of open streams and
# concurrent requests each hold a connection for a command or two.
REDIS_MAX_CONNECTIONS = 1024
# Connections the kernel may hold before we accept them (aiohttp's default is 128): a burst of
# clients past it (hundreds of keep-alive connections opening at once, SSE reconnects after a
# restart) waits out TCP retransmissions, a second or more. The kernel caps it at somaxconn.
LISTEN_BACKLOG = 2048
# An idle kept-alive connection is closed after this long (web.run_app's default).
KEEPALIVE_TIMEOUT_S = 75.0

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "media-src 'self' blob:; connect-src 'self'; base-uri 'none'; form-action 'self'; "
        "frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


async def _security_headers(request: web.Request, response: web.StreamResponse) -> None:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)


async def _redis_ctx(app: web.Application) -> AsyncIterator[None]:
    redis = connect(app[SETTINGS], max_connections=REDIS_MAX_CONNECTIONS)
    app[QUEUE] = Queue(redis, app[SETTINGS])
    yield
    await app[QUEUE].aclose()


async def _hub_ctx(app: web.Application) -> AsyncIterator[None]:
    hub = EventHub(app[SETTINGS], app[QUEUE].keys, on_reconnect=app[METRICS].hub_reconnects.inc)
    app[HUB] = hub
    await hub.start()
    yield
    await hub.stop()


async def _throughput_ctx(app: web.Application) -> AsyncIterator[None]:
    meter = ThroughputMeter(alert=BacklogAlert(app[SETTINGS].web.backlog_alert))
    app[THROUGHPUT] = meter
    await meter.start(app[QUEUE])
    yield
    await meter.stop()


async def _callbacks_ctx(app: web.Application) -> AsyncIterator[None]:
    settings = app[SETTINGS]
    sender = None
    if settings.callbacks:
        sender = CallbackSender(
            app[QUEUE].outbox,
            app[CALLBACK_SECRET],
            allow=settings.callbacks.allow_networks,
            schedule=settings.callbacks.schedule,
            timeout_s=settings.callbacks.callback_timeout_s,
            public_url=settings.web.public_url or f"http://{settings.web.host}:{settings.web.port}",
            on_outcome=lambda outcome: app[METRICS].callbacks.labels(outcome).inc(),
        )
        await sender.start()
    yield
    if sender is not None:
        await sender.stop()


async def _close_connections(app: web.Application) -> None:
    await app[CONNECTIONS].close_all(app[HUB])


async def _close_derived(app: web.Application) -> None:
    app[DERIVED].close()
    app[CODECS].close()


def create_app(settings: Settings) -> web.Application:
    app = web.Application(
        client_max_size=settings.limits.max_body_bytes,
        middlewares=[
            forwarded_middleware(settings.web.proxy_networks),
            metrics_middleware,
            error_middleware,
            origin_middleware,
            # After the Host check, before the key and identity checks: a preflight carries no
            # key, and is given no identity.
            cors_middleware,
            key_guesses_middleware,
            identity_middleware,
        ],
        # Bodies are read as sent; compressed ones are refused with a 415 (web/intake/bodies.py).
        handler_args={"auto_decompress": False},
    )
    app[SETTINGS] = settings
    app[COOKIE_SECRET] = cookie_secret(settings)
    app[CALLBACK_SECRET] = service_secret(settings.callbacks.callback_secret, app[COOKIE_SECRET])
    app[KEY_SHARES] = key_shares(settings, app[COOKIE_SECRET])
    app[SUSPECTS] = {}
    app[METRICS] = Metrics()
    app[CONNECTIONS] = Connections()
    app[DERIVED] = DerivedFiles(DERIVED_FILES_BYTES)
    app[CODECS] = CodecProcess()
    app[MEMORY] = MemoryBudget(
        settings.limits.web_memory_bytes, settings.limits.web_memory_per_address_bytes
    )
    rate = settings.limits.send_rate_per_address_bytes
    app[EGRESS] = EgressPacer(rate, rate * SEND_BURST_S)
    rate = settings.limits.encode_rate_per_address_bytes
    app[ENCODING] = EgressPacer(rate, rate * SEND_BURST_S)
    aiohttp_jinja2.setup(app, loader=jinja2.FileSystemLoader(TEMPLATES_DIR), autoescape=True)
    app[aiohttp_jinja2.static_root_key] = "/static"
    setup_routes(app, STATIC_DIR)
    app.cleanup_ctx.append(_redis_ctx)
    app.cleanup_ctx.append(_hub_ctx)
    app.cleanup_ctx.append(_throughput_ctx)
    app.cleanup_ctx.append(_callbacks_ctx)
    app.on_shutdown.append(_close_connections)
    app.on_cleanup.append(_close_derived)
    app.on_response_prepare.append(set_client_cookie)
    app.on_response_prepare.append(_security_headers)
    app.on_response_prepare.append(cors_headers)
    app.on_response_prepare.append(json_error_bodies)
    return app


def main(settings: Settings) -> int:
    """Entry point of `chattts-online web`: serve until SIGINT or SIGTERM, then stop cleanly."""
    if not settings.redis.redis_url:
        log.error("no Redis URL: set CHATTTS_REDIS_URL (or use `chattts-online run`)")
        return 2
    # asyncio's own loop, not uvloop: measured with 256 keep-alive connections (bench/submit.py)
    # uvloop served ~10-40% more submits but held some connections back for seconds (p99 2-3 s
    # against 0.2-0.7 s; also on /healthz, with no Redis involved).
    quiet_malformed_requests()
    if settings.web.admin_key_set and not settings.web.user_key_set:
        log.info(
            "the operators' console is on (CHATTTS_ADMIN_KEYS) and the API open to clients "
            "without a key (set CHATTTS_API_KEYS to require one)"
        )
    if port_taken(settings.web.host, settings.web.port):
        log.error("%s", port_in_use_message(settings.web.port))
        return PORT_IN_USE_EXIT
    raise_descriptor_limit()
    asyncio.run(serve(create_app(settings), settings))
    return 0


class GuardedRunner(web.AppRunner):
    """aiohttp's runner, serving through the listener's guarded protocol (web/listener.py)."""

    def __init__(self, app: web.Application, counter: ConnectionCounter, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self.counter = counter

    async def _make_server(self) -> web.Server:
        plain = await super()._make_server()  # the app started, its handler's arguments set
        return GuardedServer(
            plain.request_handler,
            request_factory=plain.request_factory,
            handler_cancellation=plain.handler_cancellation,
            counter=self.counter,
            header_timeout_s=self._app[SETTINGS].limits.header_timeout_s,
            **plain._kwargs,
        )


async def serve(app: web.Application, settings: Settings) -> None:
    """Serve `app` until SIGINT or SIGTERM, then stop cleanly: `web.run_app`, less its fixed
    protocol (aiohttp has no setting for a header deadline or a cap per address)."""
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(AcceptFailures())
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    counter = ConnectionCounter(
        settings.limits.connections_per_address, settings.web.proxy_networks
    )
    runner = GuardedRunner(
        app,
        counter,
        access_log_class=JobAccessLogger,
        keepalive_timeout=KEEPALIVE_TIMEOUT_S,
        shutdown_timeout=min(SHUTDOWN_TIMEOUT_S, settings.worker.shutdown_grace_s),
    )
    await runner.setup()
    census = None
    if counter.per_address:  # the cap across the fleet: each process tells the others
        process = f"{socket.gethostname()}:{os.getpid()}".replace("|", "")
        census = asyncio.create_task(counter.census(app[QUEUE].limits, process))
    try:
        site = web.TCPSite(runner, settings.web.host, settings.web.port, backlog=LISTEN_BACKLOG)
        await site.start()
        log.info("Running on http://%s:%d", settings.web.host, settings.web.port)
        await stop.wait()
    finally:
        if census is not None:
            census.cancel()
        await runner.cleanup()
