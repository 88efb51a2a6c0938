"""Every WebSocket the service answers, whatever protocol it speaks: opened behind the origin
check and the connection's leases, frames read at a bounded rate, frames out through one bounded
queue (keyed, so that a context's or a job's can be dropped at once, its audio counted in the
memory budget until sent), a client that stops reading closed, and each bad frame answered."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import WSCloseCode, WSMsgType, web

from core.infra.redis_client import REDIS_DOWN
from web.appkeys import CONNECTIONS, EGRESS, MEMORY, METRICS, SETTINGS
from web.clients.identity import client_id
from web.errors import ApiError, redis_unavailable
from web.middlewares.origin import check_websocket_origin
from web.monitors.egress import EgressPacer
from web.monitors.memory import address
from web.replies.sending import send_timeout_s

log = logging.getLogger("chattts_online.web.ws")

# Audio queued for one socket at most (about 20 s of 24 kHz PCM): a listener far behind waits,
# then is closed; a socket nobody reads holds no more than this.
QUEUE_BYTES = 1024 * 1024
# Frames a client's socket is read at, on average and at once: an LLM's tokens, one a frame, are
# far below; past it the socket is read later (TCP holds the sender back), nothing is refused.
FRAMES_PER_S = 200.0
FRAMES_BURST = 1_000
# Error frames a throttled socket is sent for its client's frames: a few at once, then one per
# this many seconds; a client that sends thousands of bad frames is told once a second.
ERRORS_BURST = 10
ERROR_EVERY_S = 1.0


class SlowReader(Exception):
    """The client stopped reading its frames: its socket is being closed."""


@contextlib.asynccontextmanager
async def opened(
    request: web.Request, *leases: contextlib.AbstractAsyncContextManager[Any]
) -> AsyncIterator[web.WebSocketResponse]:
    """Check the origin, hold `leases` (past a cap: a plain 429 before the upgrade), upgrade, and
    count the socket open while the block runs."""
    check_websocket_origin(request)
    settings = request.app[SETTINGS]
    async with contextlib.AsyncExitStack() as stack:
        for lease in leases:
            await stack.enter_async_context(lease)
        ws = web.WebSocketResponse(
            heartbeat=max(1.0, settings.web.sse_ping_s), max_msg_size=settings.limits.max_body_bytes
        )
        await ws.prepare(request)
        connections, metrics = request.app[CONNECTIONS], request.app[METRICS]
        connections.ws.add(ws)
        metrics.ws_open.inc()
        try:
            yield ws
        finally:
            connections.ws.discard(ws)
            metrics.ws_open.dec()


def json_frame(data: str) -> dict[str, Any]:
    """A client's text frame: a JSON object, else the 400 that says what is wrong."""
    try:
        msg = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, f"the frame is not valid JSON: {exc}", code="invalid_json") from None
    if not isinstance(msg, dict):
        raise ApiError(400, "a frame must be a JSON object", code="invalid_message")
    return msg


def unknown_op(op: Any, ops: Sequence[str], field: str = "op") -> ApiError:
    """The answer to a frame that asks for what the protocol does not do (`unknown_op`)."""
    message = f"unknown {field} {op!r}; the {field}s are {', '.join(ops)}"
    return ApiError(400, message, code=f"unknown_{field}", param=field)


@dataclass
class _Frame:
    key: str | None  # whose frame it is (a context, a job): dropped together
    text: str | None
    data: bytes | None
    held: int  # bytes counted in the web tier's memory budget until sent or dropped
    close: int | None = None  # close the socket with this code once the frames before it left


class Socket:
    """One socket's frames out, in order: a text frame and the binary frame after it stay
    adjacent; `drop(key)` takes every queued frame of a key out. `slow_message` is what a client
    that stopped reading is told as it is closed (1013); `throttle_errors`: its bad frames are
    answered a few at once, then once a second."""

    def __init__(
        self,
        request: web.Request,
        ws: web.WebSocketResponse,
        slow_message: str,
        throttle_errors: bool = True,
    ) -> None:
        self.request, self.ws, self.app = request, ws, request.app
        self.client, self.source = client_id(request), address(request)
        self.slow_message, self.throttle_errors = slow_message, throttle_errors
        self._frames: deque[_Frame] = deque()
        # No lock: nothing awaits between a look at the queue and its change.
        self._room_freed = asyncio.Event()
        self._frame_ready = asyncio.Event()
        self._capacity = self.app[SETTINGS].web.connection_queue_size
        self._queued_bytes = 0  # audio queued, not yet written
        # A frame that cannot enter the queue this long means the client stopped reading: the
        # same write timeout as SSE (two ping periods, 10 s at most).
        self.stall_s = send_timeout_s(self.app[SETTINGS].web.sse_ping_s)
        self._closing: asyncio.Task[None] | None = None
        self._frames_in = EgressPacer(FRAMES_PER_S, FRAMES_BURST)  # one bucket: this socket
        self._error_tokens, self._errors_at = float(ERRORS_BURST), time.monotonic()

    # -- frames out -----------------------------------------------------------------------------

    async def send(
        self,
        text: str | None,
        data: bytes | None = None,
        key: str | None = None,
        size: int = 0,
        held: bool = False,
    ) -> None:
        """Queue a text frame and/or a binary frame (adjacent); `size` bytes of it count in the
        memory budget until it leaves (`held`: they are counted already). Waits while the queue
        is full; SlowReader past stall_s."""
        if size and not held:
            await self.reserve(size)
        try:
            async with asyncio.timeout(self.stall_s):
                while not self._has_room(size):
                    self._room_freed.clear()
                    await self._room_freed.wait()
        except BaseException as exc:
            if size:
                self.app[MEMORY].give(self.source, size)
            if isinstance(exc, TimeoutError):
                raise self._slow() from None
            raise
        self._frames.append(_Frame(key, text, data, size))
        self._queued_bytes += size
        self._frame_ready.set()

    async def reserve(self, size: int) -> None:
        """Count `size` bytes about to be fetched and sent in the memory budget (SlowReader when
        the budget has no room for them within stall_s)."""
        try:
            await self.app[MEMORY].wait_take(
                self.source, size, "audio for this WebSocket", self.stall_s
            )
        except ApiError:
            raise self._slow() from None

    def _has_room(self, size: int) -> bool:
        """Room for a frame of `size` bytes: the queue holds at most CHATTTS_CONNECTION_QUEUE_SIZE
        frames and QUEUE_BYTES of audio (one frame however large when it is empty)."""
        if len(self._frames) >= self._capacity:
            return False
        return not self._frames or self._queued_bytes + size <= QUEUE_BYTES

    def _slow(self) -> SlowReader:
        """The client stopped reading: its socket is closed (1013), whichever task found out
        (the reader's, or one that had a frame to send)."""
        if self._closing is None:
            self._closing = asyncio.create_task(
                self.close(WSCloseCode.TRY_AGAIN_LATER, self.slow_message)
            )
        return SlowReader()

    async def close_after_sent(self, code: int = WSCloseCode.OK) -> None:
        """Close the socket once the frames queued so far have left."""
        self._frames.append(_Frame(None, None, None, 0, code))
        self._frame_ready.set()

    def drop(self, key: str) -> None:
        """Take every queued frame of `key` out."""
        kept: deque[_Frame] = deque()
        for frame in self._frames:
            if frame.key != key:
                kept.append(frame)
            elif frame.held:
                self.app[MEMORY].give(self.source, frame.held)
        self._frames = kept
        self._queued_bytes = sum(frame.held for frame in kept)
        self._room_freed.set()

    async def _writer(self) -> None:
        while True:
            while not self._frames:
                self._frame_ready.clear()
                await self._frame_ready.wait()
            frame = self._frames.popleft()
            self._queued_bytes -= frame.held
            self._room_freed.set()
            if frame.close is not None:
                await self.close(frame.close, "")
                return
            try:
                if frame.text is not None:
                    await self.ws.send_str(frame.text)
                if frame.data is not None:
                    await self.app[EGRESS].pace(self.source, len(frame.data))
                    await self.ws.send_bytes(frame.data)
            finally:
                if frame.held:
                    self.app[MEMORY].give(self.source, frame.held)

    # -- frames in ------------------------------------------------------------------------------

    async def answered(
        self, work: Awaitable[None], fail: Callable[[ApiError], Awaitable[None]]
    ) -> None:
        """Run what a client's frame asks for; whatever goes wrong is told to `fail` as the error
        the client gets (a bad frame never ends the connection), except a client that stopped
        reading (SlowReader), which ends it."""
        try:
            await work
        except ApiError as exc:
            await self._told(fail, exc)
        except REDIS_DOWN:
            await self._told(fail, redis_unavailable())
        except SlowReader:
            raise
        except Exception:
            log.exception("WebSocket frame failed")
            error = ApiError(500, "internal error; it was logged", code="internal_error")
            await self._told(fail, error)

    async def _told(self, fail: Callable[[ApiError], Awaitable[None]], error: ApiError) -> None:
        if self._error_due():
            await fail(error)

    def _error_due(self) -> bool:
        """Whether an error frame may go now (throttled: ERRORS_BURST at once, then one per
        ERROR_EVERY_S; the others are dropped)."""
        if not self.throttle_errors:
            return True
        now = time.monotonic()
        refill = (now - self._errors_at) / ERROR_EVERY_S
        self._error_tokens = min(ERRORS_BURST, self._error_tokens + refill)
        self._errors_at = now
        if self._error_tokens < 1:
            return False
        self._error_tokens -= 1
        return True

    async def run(
        self,
        on_text: Callable[[str], Awaitable[None]],
        on_binary: Callable[[], Awaitable[None]],
        *tasks: Awaitable[None],
    ) -> None:
        """Read frames until the client leaves or stops reading, with `tasks` running beside;
        then stop them and `stopped()`."""
        running: list[asyncio.Future[None]] = [asyncio.ensure_future(self._writer())]
        running += [asyncio.ensure_future(task) for task in tasks]
        try:
            async for msg in self.ws:
                await self._frames_in.pace("", 1)
                if msg.type == WSMsgType.TEXT:
                    await on_text(msg.data)
                elif msg.type == WSMsgType.BINARY and self._error_due():
                    await on_binary()  # (a protocol that takes text only says so)
        except SlowReader:
            await self.close(WSCloseCode.TRY_AGAIN_LATER, self.slow_message)
        finally:
            # Shielded: the server cancels a handler whose client went away, and what the
            # socket holds (jobs, memory) must be given back all the same.
            await asyncio.shield(self._stop(running))

    async def _stop(self, tasks: list[asyncio.Future[None]]) -> None:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.stopped()
        for frame in self._frames:
            if frame.held:
                self.app[MEMORY].give(self.source, frame.held)
        self._frames.clear()

    async def stopped(self) -> None:
        """What a protocol gives back once its socket is done (its contexts, its followers)."""

    async def close(self, code: int, message: str) -> None:
        with contextlib.suppress(Exception):
            await self.ws.close(code=code, message=message.encode())
