"""Server-Sent Events: one job's events (ending after its terminal one), or all of a client's."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from aiohttp import web
from aiohttp_sse import EventSourceResponse

from web.appkeys import HUB, METRICS, QUEUE, SETTINGS
from web.clients.identity import client_id
from web.clients.limits import stream_lease
from web.errors import dumps, job_not_found
from web.hub import TERMINAL_TYPES, follow
from web.replies.sending import send_timeout_s
from web.schemas.jobs import valid_cursor, valid_job_id

log = logging.getLogger("chattts_online.web.sse")

# Browsers reconnect this long after a dropped stream (the SSE `retry:` field), in ms.
RECONNECT_MS = 1000


def _cursor(request: web.Request) -> str | None:
    header = request.headers.get("Last-Event-ID")
    if header is not None and header.strip():
        return valid_cursor(header, "Last-Event-ID")
    return valid_cursor(request.query.get("last_event_id"))


async def job_events(request: web.Request) -> web.StreamResponse:
    """Replay after the cursor, follow live, end after the terminal event.

    204 when the job already ended and the cursor is at or past its last event: per the SSE spec
    that tells a browser's EventSource to stop reconnecting.
    """
    queue = request.app[QUEUE]
    job_id = valid_job_id(request.match_info["job_id"])
    cursor = _cursor(request)
    state = await queue.state(job_id)
    if state is None:
        raise job_not_found(job_id)
    stream = queue.keys.job_events(job_id)
    ended = state in TERMINAL_TYPES
    if ended and cursor is not None and not await queue.events.after(stream, cursor, count=1):
        return web.Response(status=204)
    return await _stream(request, stream, cursor, job_id)


async def client_events(request: web.Request) -> web.StreamResponse:
    """Every event of every job of this client (cookie or API key); never ends by itself."""
    keys = request.app[QUEUE].keys
    return await _stream(request, keys.client_events(client_id(request)), _cursor(request), None)


async def _stream(
    request: web.Request, stream: str, cursor: str | None, job_id: str | None
) -> web.StreamResponse:
    async with stream_lease(request):
        return await _serve(request, stream, cursor, job_id)


async def _serve(
    request: web.Request, stream: str, cursor: str | None, job_id: str | None
) -> web.StreamResponse:
    app = request.app
    ping_s = app[SETTINGS].web.sse_ping_s
    response = EventSourceResponse(ping_interval=ping_s, send_timeout=send_timeout_s(ping_s))
    await response.prepare(request)
    metrics = app[METRICS]
    opened_ms = int(time.time() * 1000)
    metrics.sse_open.inc()

    async def pump() -> None:
        # The reconnection delay for this stream (a block with no data dispatches no event).
        await response.write(f"retry: {RECONNECT_MS}\r\n\r\n".encode())
        async with contextlib.aclosing(
            follow(app[QUEUE], app[HUB], stream, cursor, job_id=job_id)
        ) as events:
            async for stream_id, event in events:
                await response.send(
                    dumps(event), id=stream_id, event=str(event.get("type", "message"))
                )
                metrics.event_sent("sse", stream_id, opened_ms)

    # The pump ends after a terminal event or at shutdown; the ping task ends when the client
    # goes away (a failed ping write). Whichever comes first ends the other.
    pumping = asyncio.create_task(pump())
    pinging = asyncio.create_task(response.wait())
    try:
        await asyncio.wait({pumping, pinging}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (pumping, pinging):
            task.cancel()
        results = await asyncio.gather(pumping, pinging, return_exceptions=True)
        metrics.sse_open.dec()
        with contextlib.suppress(Exception):
            response.stop_streaming()
    for result in results:
        if isinstance(result, Exception) and not isinstance(
            result, ConnectionResetError | TimeoutError | RuntimeError
        ):
            # Headers are sent: nothing to answer but the end of the stream (the client resumes).
            log.error("SSE %s failed", stream, exc_info=result)
    return response
