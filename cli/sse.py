"""Server-Sent Events read from an aiohttp response, parsed as the HTML standard says: the one
reader of the service's event streams for the CLI, the benchmarks and the tests.

Written here rather than taken from a library: the well-kept parser (httpx-sse) reads httpx
responses, and every client of ours speaks aiohttp; the format is a page of the standard.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson


@dataclass
class SseEvent:
    id: str | None  # the last event id seen (it persists across events, as the standard says)
    event: str  # "message" unless named
    data: str
    retry: int | None = None

    def json(self) -> Any:
        return orjson.loads(self.data)


async def _lines(response: aiohttp.ClientResponse) -> AsyncIterator[str]:
    """The stream's lines: ended by CRLF, LF or a lone CR; a CR last in what has arrived may be
    half a CRLF, so it waits for the next piece (or the end of the stream)."""
    buffer = b""
    first = True
    async for chunk in response.content.iter_any():
        buffer += chunk
        while True:
            cut = min((i for i in (buffer.find(b"\r"), buffer.find(b"\n")) if i >= 0), default=-1)
            if cut < 0 or (buffer[cut] == 0x0D and cut + 1 == len(buffer)):
                break
            width = 2 if buffer[cut : cut + 2] == b"\r\n" else 1
            line, buffer = buffer[:cut].decode("utf-8", "replace"), buffer[cut + width :]
            if first:
                line, first = line.removeprefix("\ufeff"), False  # a byte order mark, once
            yield line
    if buffer.endswith(b"\r"):
        yield buffer[:-1].decode("utf-8", "replace")


async def sse_events(response: aiohttp.ClientResponse) -> AsyncIterator[SseEvent]:
    """Each event the stream dispatches, until it ends; comment lines (pings) are skipped."""
    ev_id: str | None = None
    ev_type = ""
    data: list[str] = []
    retry: int | None = None
    async for line in _lines(response):
        if line == "":
            if data:
                yield SseEvent(ev_id, ev_type or "message", "\n".join(data), retry)
            ev_type, data = "", []  # the id and the retry delay persist
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "id" and "\0" not in value:
            ev_id = value
        elif name == "event":
            ev_type = value
        elif name == "data":
            data.append(value)
        elif name == "retry" and value.isascii() and value.isdigit():
            retry = int(value)
