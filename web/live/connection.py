"""A live WebSocket's plumbing, whatever protocol it speaks: its contexts, its bounded outgoing
frames (those of a cleared context dropped at once), idle contexts closed, its age bounded."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import WSCloseCode, WSMsgType, web

from web.appkeys import EGRESS, MEMORY, SETTINGS
from web.clients.identity import client_id
from web.errors import ApiError
from web.live.options import LiveOptions
from web.live.speaker import Listener, Speaker
from web.monitors.memory import address
from web.replies.sending import send_timeout_s

log = logging.getLogger("chattts_online.web.live")

# How often idle contexts and the connection's age are looked at.
WATCH_S = 1.0


class SlowReader(Exception):
    """The client stopped reading its frames."""


@dataclass
class _Frame:
    context: str | None
    text: str | None
    data: bytes | None
    held: int  # bytes counted in the web tier's memory budget until sent or dropped


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
        self._room = asyncio.Condition()
        self._capacity = self.app[SETTINGS].web.connection_queue_size
        self.stall_s = send_timeout_s(self.app[SETTINGS].web.sse_ping_s)
        self.opened = time.monotonic()

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
                raise SlowReader from None
        try:
            async with asyncio.timeout(self.stall_s), self._room:
                await self._room.wait_for(lambda: len(self._frames) < self._capacity)
                self._frames.append(_Frame(context, text, data, size))
                self._room.notify_all()
        except BaseException as exc:
            if size:
                self.app[MEMORY].give(self.source, size)
            if isinstance(exc, TimeoutError):
                raise SlowReader from None
            raise

    def drop(self, context: str) -> None:
        """Take every queued frame of `context` out."""
        kept: deque[_Frame] = deque()
        for frame in self._frames:
            if frame.context != context:
                kept.append(frame)
            elif frame.held:
                self.app[MEMORY].give(self.source, frame.held)
        self._frames = kept

    async def _writer(self) -> None:
        while True:
            async with self._room:
                await self._room.wait_for(lambda: bool(self._frames))
                frame = self._frames.popleft()
                self._room.notify_all()
            try:
                if frame.text is not None:
                    await self.ws.send_str(frame.text)
                if frame.data is not None:
                    await self.app[EGRESS].pace(self.source, len(frame.data))
                    await self.ws.send_bytes(frame.data)
            finally:
                if frame.held:
                    self.app[MEMORY].give(self.source, frame.held)

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
                if msg.type == WSMsgType.TEXT:
                    await on_text(msg.data)
                elif msg.type == WSMsgType.BINARY:
                    await on_binary()
        except SlowReader:
            await self.close(WSCloseCode.TRY_AGAIN_LATER, "too slow: read your frames")
        finally:
            for task in (writer, watcher):
                task.cancel()
            await asyncio.gather(writer, watcher, return_exceptions=True)
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
                if speaker.idle_s() > self.limits.live_idle_s:
                    await self.close_context(name)
                    with contextlib.suppress(SlowReader):
                        await on_idle(name)

    async def close(self, code: int, message: str) -> None:
        with contextlib.suppress(Exception):
            await self.ws.close(code=code, message=message.encode())
