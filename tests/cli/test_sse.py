"""The one SSE reader (cli/sse.py), fed by a real aiohttp server the stream's bytes in awkward
pieces: line ends of every kind, comments, multi-line data, ids that persist."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from cli.sse import SseEvent, sse_events

STREAM = (
    b"\xef\xbb\xbf: a byte order mark, then a ping\r\n"
    b'id: 1-0\r\nevent: queued\r\ndata: {"a": 1}\r\n\r\n'
    b"data: first line\ndata:second line\n\n"  # no id: the last one persists
    b"retry: 1500\revent: done\rid: 2-0\rdata: x\r\r"
    b"event: empty\n\n"  # no data: nothing is dispatched
    b"id: bad\x00id\nretry: \xc2\xb2\ndata: \xff\n\n"  # a NUL id and a non-ASCII retry: ignored
    b"data: last\r\r"  # the stream ends on a lone CR: it still ends the event
)


async def _serve(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for i in range(0, len(STREAM), 7):  # pieces that cut lines and line ends apart
        await response.write(STREAM[i : i + 7])
        await asyncio.sleep(0)
    return response


async def test_events_as_the_standard_parses_them() -> None:
    app = web.Application()
    app.router.add_get("/", _serve)
    async with TestClient(TestServer(app)) as client:
        response = await client.get("/")
        events: list[Any] = [event async for event in sse_events(response)]
    assert events == [
        SseEvent("1-0", "queued", '{"a": 1}'),
        SseEvent("1-0", "message", "first line\nsecond line"),
        SseEvent("2-0", "done", "x", retry=1500),
        SseEvent("2-0", "message", "\ufffd", retry=1500),  # invalid UTF-8 replaced, not fatal
        SseEvent("2-0", "message", "last", retry=1500),
    ]
    assert events[0].json() == {"a": 1}
