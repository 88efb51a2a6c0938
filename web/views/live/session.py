"""`GET /v1/live`: a live session over WebSocket. Text goes in as it is written, in pieces of any
size, into one or more contexts; each context's audio comes back in order as it is made, with the
characters each piece covers (docs/api.md#live-sessions).

Client -> server (JSON text frames; "context" defaults to "main"):
    {"op": "open", "context"?, "voice"?, "seed"?, "speed"?, "params"?: {...}}
    {"op": "text", "context"?, "text": str, "flush"?: bool}
    {"op": "flush" | "clear" | "close", "context"?}
    {"op": "ping", "ref"?}
Server -> client:
    {"type": "opened", "context", "voice", "seed", "format": "pcm", "sample_rate": 24000}
    {"type": "audio", "context", "segment", "bytes", "start_ms", "duration_ms", "alignment":
     {"chars", "char_start_ms", "char_duration_ms"}}, then a binary frame of `bytes` bytes
    {"type": "segment", "context", "segment", "text", "start_ms", "end_ms", "words": [...]}
    {"type": "cleared" | "done", "context", ...}, {"type": "pong", "ref"}
    {"type": "error", "context", "error": {...}}  (never closes another context)
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web

from core.audio.formats import SAMPLE_RATE
from web.errors import ApiError, dumps
from web.live.connection import LiveConnection, serve
from web.live.options import live_options
from web.live.pieces import AudioPiece, SpokenSegment
from web.live.speaker import Speaker
from web.replies.sockets import json_frame, unknown_op

log = logging.getLogger("chattts_online.web.live")

OPS = ("open", "text", "flush", "clear", "close", "ping")
MAX_CONTEXT_NAME = 64


async def live(request: web.Request) -> web.StreamResponse:
    return await serve(request, _Session)


class _Context:
    """A context's listener: its audio and news as this protocol's frames."""

    def __init__(self, connection: LiveConnection, name: str) -> None:
        self.connection, self.name = connection, name
        self.speaker: Speaker | None = None

    async def audio(self, piece: AudioPiece) -> None:
        header = {
            "type": "audio",
            "context": self.name,
            "segment": piece.segment,
            "bytes": len(piece.pcm),
            "start_ms": round(piece.start_ms, 1),
            "duration_ms": round(piece.duration_ms, 1),
            "alignment": {
                "chars": piece.chars,
                "char_start_ms": piece.char_start_ms,
                "char_duration_ms": piece.char_duration_ms,
            },
        }
        await self.connection.send(dumps(header), piece.pcm, self.name, len(piece.pcm))

    async def segment_end(self, segment: SpokenSegment) -> None:
        await self._frame(
            {
                "type": "segment",
                "segment": segment.index,
                "text": segment.text,
                "start_ms": round(segment.start_ms, 1),
                "end_ms": round(segment.end_ms, 1),
                "words": [{"word": w, "start_ms": s, "end_ms": e} for w, s, e in segment.words],
            }
        )

    async def checked(self, segment: int, checks: list[dict[str, Any]]) -> None:
        await self._frame({"type": "check", "segment": segment, "checks": checks})

    async def cleared(self) -> None:
        self.connection.drop(self.name)
        await self._frame({"type": "cleared"})

    async def finished(self, segments: int, audio_ms: float) -> None:
        if self.speaker is not None:
            self.connection.forget(self.name, self.speaker)
        await self._frame({"type": "done", "segments": segments, "audio_ms": round(audio_ms, 1)})

    async def failed(self, error: ApiError) -> None:
        await self._frame({"type": "error", "error": error.error()})

    async def _frame(self, frame: dict[str, Any]) -> None:
        await self.connection.send(dumps({**frame, "context": self.name}), key=self.name)


class _Session:
    """Our own protocol over a LiveConnection."""

    def __init__(self, connection: LiveConnection) -> None:
        self.connection = connection
        self.app = connection.app

    async def run(self) -> None:
        await self.connection.serve(self._handle, self._idle, self._binary)

    async def _idle(self, name: str) -> None:
        error = ApiError(
            408,
            f"context {name!r} was idle for {self.connection.limits.live_idle_s:.0f} s (no text, "
            "nothing to speak) and was closed: open it again to go on",
            code="context_idle",
        )
        await self._error(name, error)

    async def _binary(self) -> None:
        error = ApiError(400, "send JSON text frames", code="binary_not_accepted")
        await self._error(None, error)

    async def _error(self, context: str | None, error: ApiError, ref: Any = None) -> None:
        frame: dict[str, Any] = {"type": "error", "context": context, "error": error.error()}
        if ref is not None:
            frame["ref"] = ref
        await self.connection.send(dumps(frame))

    async def _handle(self, data: str) -> None:
        context: str | None = None
        ref: Any = None

        async def work() -> None:
            nonlocal context, ref
            msg = json_frame(data)
            ref = msg.get("ref")
            context = _context_name(msg)
            await self._op(msg, context, ref)

        await self.connection.answered(work(), lambda error: self._error(context, error, ref))

    async def _op(self, msg: dict[str, Any], context: str, ref: Any) -> None:
        op = msg.get("op")
        connection = self.connection
        if op == "ping":
            await connection.send(dumps({"type": "pong", "ref": ref}))
        elif op == "open":
            await self._open(context, msg)
        elif op == "text":
            text = msg.get("text")
            if not isinstance(text, str):
                raise ApiError(422, "'text' must be a string", code="invalid_text", param="text")
            flush = msg.get("flush", False)
            if not isinstance(flush, bool):
                raise ApiError(422, "'flush' must be true or false", code="invalid_flush")
            found = connection.contexts.get(context)
            speaker = found if found is not None else await self._open(context, {})
            speaker.feed(text, flush)
        elif op in ("flush", "clear", "close"):
            open_one = connection.contexts.get(context)
            if open_one is None:
                raise ApiError(
                    404,
                    f"no open context {context!r}: send text to open it",
                    code="no_such_context",
                    param="context",
                )
            if op == "flush":
                open_one.flush()
            elif op == "clear":
                await open_one.clear()
            else:
                open_one.end()
        else:
            raise unknown_op(op, OPS)

    async def _open(self, name: str, msg: dict[str, Any]) -> Speaker:
        options = await live_options(self.app, self.connection.client, msg)
        listener = _Context(self.connection, name)
        speaker = self.connection.open(name, options, listener)
        listener.speaker = speaker
        await self.connection.send(
            dumps(
                {
                    "type": "opened",
                    "context": name,
                    "voice": options.voice,
                    "seed": options.fields.get("seed"),
                    "format": "pcm",
                    "sample_rate": SAMPLE_RATE,
                }
            )
        )
        return speaker


def _context_name(msg: dict[str, Any]) -> str:
    name = msg.get("context", "main")
    if not isinstance(name, str) or not 0 < len(name) <= MAX_CONTEXT_NAME:
        raise ApiError(
            422,
            f"'context' must be a name of 1 to {MAX_CONTEXT_NAME} characters",
            code="invalid_context",
            param="context",
        )
    return name
