"""A live WebSocket's plumbing, whatever protocol it speaks: its contexts, its bounded outgoing
frames (those of a cleared context dropped at once), idle contexts closed, its age bounded."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import typing
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import WSCloseCode, WSMsgType, web

from core.infra.redis_client import REDIS_DOWN
from web.appkeys import CONNECTIONS, EGRESS, MEMORY, METRICS, SETTINGS
from web.clients.identity import client_id
from web.clients.limits import live_lease, stream_lease
from web.errors import ApiError, redis_unavailable
from web.intake.door import charge, who
from web.live.options import LiveOptions
from web.live.speaker import Listener, ListenerGone, Speaker
from web.middlewares.origin import check_websocket_origin
from web.monitors.egress import EgressPacer
from web.monitors.memory import address
from web.replies.sending import send_timeout_s

log = logging.getLogger("chattts_online.web.live")

# Audio queued for one live socket at most (about 20 s of 24 kHz PCM): a listener far behind
# waits, then is closed; a socket nobody reads holds no more than this.
QUEUE_BYTES = 1024 * 1024
# How often idle contexts and the connection's age are looked at.
WATCH_S = 1.0
# Frames a client's socket is read at, on average and at once: an LLM's tokens, one a frame, are
# far below; past it the socket is read later (TCP holds the sender back), nothing is refused.
FRAMES_PER_S = 200.0
FRAMES_BURST = 1_000
# Error frames a connection is sent for its client's frames: a few at once, then one per this
# many seconds; a client that sends thousands of bad frames is told once a second, and its other
# errors are dropped.
ERRORS_BURST = 10
ERROR_EVERY_S = 1.0


class Protocol(typing.Protocol):
    """A live protocol over one connection (ours, ElevenLabs', vLLM-Omni's)."""

    async def run(self) -> None: ...


async def serve(
    request: web.Request, protocol: Callable[[LiveConnection], Protocol]
) -> web.StreamResponse:
    """Check the origin, hold the connection's leases (past a cap: a plain 429 before the
    upgrade), upgrade, and run `protocol` over the socket until it ends."""
    check_websocket_origin(request)
    settings = request.app[SETTINGS]
    await charge(request.app, who(request), "refuse")  # opening a session is a submission
    async with stream_lease(request), live_lease(request):
        ws = web.WebSocketResponse(
            heartbeat=max(1.0, settings.web.sse_ping_s), max_msg_size=settings.limits.max_body_bytes
        )
        await ws.prepare(request)
        connections, metrics = request.app[CONNECTIONS], request.app[METRICS]
        connections.ws.add(ws)
        metrics.ws_open.inc()
        try:
            await protocol(LiveConnection(request, ws)).run()
        finally:
            connections.ws.discard(ws)
            metrics.ws_open.dec()
    return ws


def json_frame(data: str) -> dict[str, Any]:
    """A client's text frame: a JSON object, else the 400 that says what is wrong."""
    try:
        msg = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, f"the frame is not valid JSON: {exc}", code="invalid_json") from None
    if not isinstance(msg, dict):
        raise ApiError(400, "a frame must be a JSON object", code="invalid_message")
    return msg


class SlowReader(ListenerGone):
    """The client stopped reading its frames."""


@dataclass
class _Frame:
    context: str | None
    text: str | None
    data: bytes | None
    held: int  # bytes counted in the web tier's memory budget until sent or dropped
    close: int | None = None  # close the socket with this code once the frames before it left


class LiveConnection:
    """One socket's contexts and its outgoing frames, in order: a frame of a context and the
    binary frame after it stay adjacent, and `drop(context)` takes every queued frame of a
    context out (barge-in silences what was queued, not only what is still to be made)."""

    def __init__(self, request: web.Request, ws: web.WebSocketResponse) -> None:
        self.request, self.ws, self.app = request, ws, request.app
        self.client, self.source = client_id(request), address(request)
        self.limits = self.app[SETTINGS].limits
        self.contexts: dict[str, Speaker] = {}
        self._frames: deque[_Frame] = deque()
        # No lock: nothing awaits between a look at the queue and its change.
        self._room_freed = asyncio.Event()
        self._frame_ready = asyncio.Event()
        self._capacity = self.app[SETTINGS].web.connection_queue_size
        self._queued_bytes = 0  # audio queued, not yet written
        self.stall_s = send_timeout_s(self.app[SETTINGS].web.sse_ping_s)
        self.opened = time.monotonic()
        self._closing: asyncio.Task[None] | None = None
        # How long a context may idle (a protocol may take its client's wish, within reason).
        self.idle_s = self.limits.live_idle_s
        self._frames_in = EgressPacer(FRAMES_PER_S, FRAMES_BURST)  # one bucket: this socket
        self._error_tokens, self._errors_at = float(ERRORS_BURST), time.monotonic()
        self.errors_dropped = 0

    # -- contexts -------------------------------------------------------------------------------

    def open(self, name: str, options: LiveOptions, listener: Listener) -> Speaker:
        if name in self.contexts:
            raise ApiError(
                409,
                f"context {name!r} is open already: close it first, or use another name",
                code="context_exists",
                param="context",
            )
        if len(self.contexts) >= self.limits.live_contexts:
            raise ApiError(
                429,
                f"at most {self.limits.live_contexts} contexts per connection: close one first",
                code="too_many_contexts",
                param="context",
            )
        speaker = Speaker(self.app, self.client, self.source, options, listener)
        self.contexts[name] = speaker
        return speaker

    async def close_context(self, name: str) -> None:
        """Stop a context at once and forget it (its queued frames dropped)."""
        speaker = self.contexts.pop(name, None)
        if speaker is not None:
            await speaker.aclose()
        self.drop(name)

    def forget(self, name: str, speaker: Speaker) -> None:
        """A context that finished leaves (unless another of that name took its place)."""
        if self.contexts.get(name) is speaker:
            del self.contexts[name]

    # -- frames ---------------------------------------------------------------------------------

    async def send(
        self,
        text: str | None,
        data: bytes | None = None,
        context: str | None = None,
        size: int = 0,
    ) -> None:
        """Queue a text frame and/or a binary frame (adjacent); `size` bytes of it count in the
        memory budget until it leaves. Waits while the queue is full; SlowReader past stall_s."""
        if size:
            try:
                await self.app[MEMORY].wait_take(
                    self.source, size, "audio for this WebSocket", self.stall_s
                )
            except ApiError:
                raise self._slow() from None
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
        self._frames.append(_Frame(context, text, data, size))
        self._queued_bytes += size
        self._frame_ready.set()

    def _has_room(self, size: int) -> bool:
        """Room for a frame of `size` bytes: the queue holds at most CHATTTS_CONNECTION_QUEUE_SIZE
        frames and QUEUE_BYTES of audio (one frame however large when it is empty)."""
        if len(self._frames) >= self._capacity:
            return False
        return not self._frames or self._queued_bytes + size <= QUEUE_BYTES

    def _slow(self) -> SlowReader:
        """The client stopped reading: its socket is closed (1013), whichever task found out
        (the reader's, or a context's that had audio to send)."""
        if self._closing is None:
            self._closing = asyncio.create_task(
                self.close(WSCloseCode.TRY_AGAIN_LATER, "too slow: read your frames")
            )
        return SlowReader()

    async def close_after_sent(self, code: int = WSCloseCode.OK) -> None:
        """Close the socket once the frames queued so far have left."""
        self._frames.append(_Frame(None, None, None, 0, code))
        self._frame_ready.set()

    def drop(self, context: str) -> None:
        """Take every queued frame of `context` out."""
        kept: deque[_Frame] = deque()
        for frame in self._frames:
            if frame.context != context:
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

    async def answered(
        self, work: Awaitable[None], fail: Callable[[ApiError], Awaitable[None]]
    ) -> None:
        """Run what a client's frame asks for; whatever goes wrong is told to `fail` as the error
        the client gets (a bad frame never ends the connection, nor any other context; one error
        frame a second at most), except a client that stopped reading (SlowReader), which ends
        it."""
        try:
            await work
        except ApiError as exc:
            await self._told(fail, exc)
        except REDIS_DOWN:
            await self._told(fail, redis_unavailable())
        except SlowReader:
            raise
        except Exception:
            log.exception("live frame failed")
            error = ApiError(500, "internal error; it was logged", code="internal_error")
            await self._told(fail, error)

    async def _told(self, fail: Callable[[ApiError], Awaitable[None]], error: ApiError) -> None:
        if self._error_due():
            await fail(error)

    def _error_due(self) -> bool:
        """Whether an error frame may go now (ERRORS_BURST at once, then one per ERROR_EVERY_S;
        the others are dropped)."""
        now = time.monotonic()
        refill = (now - self._errors_at) / ERROR_EVERY_S
        self._error_tokens = min(ERRORS_BURST, self._error_tokens + refill)
        self._errors_at = now
        if self._error_tokens < 1:
            self.errors_dropped += 1
            return False
        self._error_tokens -= 1
        return True

    # -- the socket -----------------------------------------------------------------------------

    async def run(
        self,
        on_text: Callable[[str], Awaitable[None]],
        on_idle: Callable[[str], Awaitable[None]],
        on_binary: Callable[[], Awaitable[None]],
    ) -> None:
        """Read frames until the client leaves, the connection outlives CHATTTS_LIVE_MAX_S or
        stops reading; then stop every context."""
        writer = asyncio.create_task(self._writer())
        watcher = asyncio.create_task(self._watch(on_idle))
        try:
            async for msg in self.ws:
                await self._frames_in.pace("", 1)
                if msg.type == WSMsgType.TEXT:
                    await on_text(msg.data)
                elif msg.type == WSMsgType.BINARY and self._error_due():
                    await on_binary()  # (a protocol that takes text only says so)
        except SlowReader:
            await self.close(WSCloseCode.TRY_AGAIN_LATER, "too slow: read your frames")
        finally:
            # Shielded: the server cancels a handler whose client went away, and what the
            # contexts hold (jobs, memory) must be given back all the same.
            await asyncio.shield(self._stop(writer, watcher))

    async def _stop(self, *tasks: asyncio.Task[None]) -> None:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for name in list(self.contexts):
            await self.close_context(name)
        for frame in self._frames:
            if frame.held:
                self.app[MEMORY].give(self.source, frame.held)
        self._frames.clear()

    async def _watch(self, on_idle: Callable[[str], Awaitable[None]]) -> None:
        while True:
            await asyncio.sleep(WATCH_S)
            if time.monotonic() - self.opened > self.limits.live_max_s:
                await self.close(
                    WSCloseCode.POLICY_VIOLATION,
                    f"a live connection lasts at most {self.limits.live_max_s:.0f} s: reconnect",
                )
                return
            for name, speaker in list(self.contexts.items()):
                if speaker.idle_s() > self.idle_s:
                    await self.close_context(name)
                    with contextlib.suppress(SlowReader):
                        await on_idle(name)

    async def close(self, code: int, message: str) -> None:
        with contextlib.suppress(Exception):
            await self.ws.close(code=code, message=message.encode())
