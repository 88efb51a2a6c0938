"""A live WebSocket's contexts, whatever protocol it speaks (over web/replies/sockets.py): each
context's frames keyed by its name (a cleared one's dropped at once), idle contexts closed, the
connection's age bounded."""

from __future__ import annotations

import asyncio
import contextlib
import time
import typing
from collections.abc import Awaitable, Callable

from aiohttp import WSCloseCode, web

from web.appkeys import SETTINGS
from web.clients.limits import live_lease, stream_lease
from web.errors import ApiError
from web.intake.door import charge, who
from web.live.options import LiveOptions
from web.live.segment import Listener
from web.live.speaker import Speaker
from web.replies.sockets import SlowReader, Socket, opened

# How often idle contexts and the connection's age are looked at.
WATCH_S = 1.0


class Protocol(typing.Protocol):
    """A live protocol over one connection (ours, ElevenLabs', vLLM-Omni's)."""

    async def run(self) -> None: ...


async def serve(
    request: web.Request, protocol: Callable[[LiveConnection], Protocol]
) -> web.StreamResponse:
    """Charge the session as a submission, hold the connection's leases (past a cap: a plain 429
    before the upgrade), upgrade, and run `protocol` over the socket until it ends."""
    await charge(request.app, who(request), "refuse")  # opening a session is a submission
    async with opened(request, stream_lease(request), live_lease(request)) as ws:
        await protocol(LiveConnection(request, ws)).run()
    return ws


class LiveConnection(Socket):
    """One socket's contexts; `drop(context)` takes every queued frame of a context out
    (barge-in silences what was queued, not only what is still to be made)."""

    def __init__(self, request: web.Request, ws: web.WebSocketResponse) -> None:
        super().__init__(request, ws, "too slow: read your frames")
        self.limits = self.app[SETTINGS].limits
        self.contexts: dict[str, Speaker] = {}
        self.opened = time.monotonic()
        # How long a context may idle (a protocol may take its client's wish, within reason).
        self.idle_s = self.limits.live_idle_s

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

    # -- the socket -----------------------------------------------------------------------------

    async def serve(
        self,
        on_text: Callable[[str], Awaitable[None]],
        on_idle: Callable[[str], Awaitable[None]],
        on_binary: Callable[[], Awaitable[None]],
    ) -> None:
        """Read frames until the client leaves, the connection outlives CHATTTS_LIVE_MAX_S or
        stops reading; then stop every context."""
        await self.run(on_text, on_binary, self._watch(on_idle))

    async def stopped(self) -> None:
        for name in list(self.contexts):
            await self.close_context(name)

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
