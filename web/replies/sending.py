"""Bytes sent to a client that may never read them: counted in the process's memory budget
while they are sent, written in chunks paced by the address's send rate, and cut off when the
client stops taking them."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from core.audio.documents import FILE_PIECE_BYTES
from web.appkeys import EGRESS, MEMORY, SETTINGS
from web.errors import ApiError
from web.monitors.memory import address

log = logging.getLogger("chattts_online.web")

# aiohttp's own write buffer mark: each write waits while the client lags by more than this.
CHUNK_BYTES = 64 * 1024


def write_timeout_s(request: web.Request) -> float:
    """A client that takes no chunk for this long has stopped reading: its connection is closed
    and its bytes are freed (the event streams' write timeout: two pings, 10 s at most)."""
    return send_timeout_s(request.app[SETTINGS].web.sse_ping_s)


def holding(request: web.Request, size: int) -> contextlib.AbstractContextManager[None]:
    """Count `size` bytes (a file about to be fetched and sent) in the memory budget while the
    block runs: reserved before the fetch, so that refused requests never fetch at all."""
    return request.app[MEMORY].hold(address(request), size, "audio to send")


async def paced_write(
    request: web.Request, write: Callable[[memoryview], Awaitable[None]], data: bytes
) -> None:
    """`data` in chunks, each paced by the address's send rate and written within the write
    timeout (TimeoutError: the client stopped reading)."""
    view, timeout_s = memoryview(data), write_timeout_s(request)
    pacer, source = request.app[EGRESS], address(request)
    for start in range(0, len(view), CHUNK_BYTES):
        piece = view[start : start + CHUNK_BYTES]
        await pacer.pace(source, len(piece))
        async with asyncio.timeout(timeout_s):
            await write(piece)


async def send_bytes(
    request: web.Request, body: bytes, headers: dict[str, str], status: int = 200
) -> web.StreamResponse:
    """`body` in chunks, each within the write timeout (inside `holding`)."""
    response = web.StreamResponse(status=status, headers=headers)
    response.content_length = len(body)
    await response.prepare(request)
    if request.method == "HEAD":
        return response
    try:
        await paced_write(request, response.write, body)
        await response.write_eof()
    except TimeoutError:
        log.info(
            "%s %s: the client took nothing for %.0f s: closed",
            request.method,
            request.path,
            write_timeout_s(request),
        )
        if request.transport is not None:
            request.transport.abort()
    return response


# A file past this is sent piece by piece, each read from where it is kept as it goes out: a
# download holds one piece of the memory budget, not the file (a slow reader of a large file
# once held the budget of everyone).
# Reads end on multiples of it: a document's encoded file is kept in pieces of this size, so
# each read is one of them.
PIECE_BYTES = FILE_PIECE_BYTES


async def send_pieces(
    request: web.Request,
    read: Callable[[int, int], Awaitable[bytes | None]],
    first: int,
    last: int,
    headers: dict[str, str],
    status: int = 200,
) -> web.StreamResponse:
    """Bytes `first`..`last` (inclusive) of what `read(start, length)` reads, a piece at a
    time, each held in the memory budget while it is written: the first reserved before the
    answer starts (past the budget, a plain 429 or 503), each later one waiting for room up to
    the write timeout (then the connection is cut: the client has the bytes so far)."""
    memory, source, timeout_s = request.app[MEMORY], address(request), write_timeout_s(request)
    held = min(PIECE_BYTES, last + 1 - first)
    memory.take(source, held, "audio to send")
    response = web.StreamResponse(status=status, headers=headers)
    response.content_length = last - first + 1
    try:
        await response.prepare(request)
        if request.method == "HEAD":
            return response
        start = first
        while start <= last:
            length = min((start // PIECE_BYTES + 1) * PIECE_BYTES, last + 1) - start
            if not held:
                await memory.wait_take(source, length, "audio to send", timeout_s)
                held = length
            piece = await read(start, length)
            if piece is None or len(piece) != length:  # gone meanwhile: cut it short
                raise TimeoutError
            await paced_write(request, response.write, piece)
            memory.give(source, held)
            held = 0
            start += length
        await response.write_eof()
    except (TimeoutError, ApiError):  # it stopped reading, or room never came: cut it short
        log.info("%s %s: cut short (no reader, or no room)", request.method, request.path)
        if request.transport is not None:
            request.transport.abort()
    finally:
        if held:
            memory.give(source, held)
    return response


# A client that takes longer than this to accept one write is dropped (it resumes by cursor):
# two ping periods, at most SEND_TIMEOUT_S (production: 10 s; tests compress the ping period).
SEND_TIMEOUT_S = 10.0


def send_timeout_s(ping_s: float) -> float:
    """How long one write may wait for a client that does not read (then it is dropped)."""
    return min(SEND_TIMEOUT_S, max(1.0, 2 * ping_s))


_TRUE = ("1", "true", "yes", "on")


def disposition(request: web.Request, filename: str) -> str:
    kind = "attachment" if request.query.get("download", "").lower() in _TRUE else "inline"
    return f'{kind}; filename="{filename}"'
