"""ElevenLabs' text-in WebSockets, so that voice agents built on its plugins (LiveKit's, Pipecat's)
speak with this service by a change of base URL and key: `GET /v1/text-to-speech/{voice_id}/
multi-stream-input` (contexts) and `.../stream-input` (one context). docs/api.md, "Voice-agent
plugins (ElevenLabs-compatible)".

Client -> server (JSON text frames; `context_id` on multi-stream-input only):
    {"text": str, "context_id"?, "flush"?: bool, "voice_settings"?: {...}}
        " " opens a context; "" keeps it alive (ends the input on stream-input)
    {"context_id", "flush": true} / {"context_id", "close_context": true} / {"close_socket": true}
Server -> client:
    {"audio": base64, "alignment": {"chars", "charStartTimesMs", "charDurationsMs"},
     "normalizedAlignment": {...}, "contextId"}
    {"isFinal": true, "contextId"}   after close_context (stream-input: after "", then it closes);
        a context closed with text sent since its last flush is interrupted: its audio stops
    {"error": code, "message": str, "contextId"?}
"""

from __future__ import annotations

import base64
import functools
import logging
import math
from dataclasses import dataclass
from typing import Any, cast

from aiohttp import WSCloseCode, web

from core.audio.catalog import OutputFormat
from web.appkeys import QUEUE
from web.errors import ApiError, dumps
from web.intake.elevenlabs import seed_of, speed_of, voice_of
from web.live.connection import LiveConnection, serve
from web.live.elevenlabs_audio import AudioOut, output_format
from web.live.options import live_options
from web.live.pieces import AudioPiece, SpokenSegment
from web.live.speaker import Speaker
from web.replies.sockets import json_frame

log = logging.getLogger("chattts_online.web.live")

# ElevenLabs' own default and largest `inactivity_timeout` (s).
DEFAULT_IDLE_S, MAX_IDLE_S = 20.0, 180.0
# What ElevenLabs answers when no output_format is named.
DEFAULT_FORMAT = "mp3_44100_128"
# Models that ElevenLabs serves over another protocol (text-to-dialogue), not this one.
DIALOGUE_MODELS = ("eleven_v3", "eleven_v4")
MAX_CONTEXT_ID = 128


@dataclass(frozen=True)
class _Config:
    """A connection's query: its voice, format and clock, the idle time it asks for."""

    voice_id: str
    output: OutputFormat
    auto_mode: bool  # each text message is a whole phrase: spoken at once
    context_clock: bool  # alignment times from the context's start, not each message's
    idle_s: float | None
    single: bool  # stream-input: one context, no context ids


async def multi_stream_input(request: web.Request) -> web.StreamResponse:
    return await _serve(request, single=False)


async def stream_input(request: web.Request) -> web.StreamResponse:
    return await _serve(request, single=True)


async def _serve(request: web.Request, single: bool) -> web.StreamResponse:
    config: _Config | ApiError
    try:
        config = _config(request, single)
    except ApiError as exc:  # said in an error frame: what a WebSocket client shows
        config = exc
    return await serve(request, functools.partial(_ElevenLabs, config=config))


def _config(request: web.Request, single: bool) -> _Config:
    query = request.query
    model = query.get("model_id", "")
    if model.startswith(DIALOGUE_MODELS):
        raise ApiError(
            422,
            f"model_id {model!r} speaks ElevenLabs' text-to-dialogue protocol, which this server "
            "does not serve: name another model (eleven_flash_v2_5, eleven_turbo_v2_5, ...; every "
            "one reads with this service's engine)",
            code="unsupported_model",
            param="model_id",
        )
    idle_s: float | None = None
    if "inactivity_timeout" in query:
        try:
            idle_s = float(query["inactivity_timeout"])
        except ValueError:
            idle_s = math.nan
        if not idle_s >= 1:
            raise ApiError(
                422,
                f"inactivity_timeout must be a number of seconds, at most {MAX_IDLE_S:.0f}",
                code="invalid_inactivity_timeout",
                param="inactivity_timeout",
            )
        idle_s = min(idle_s, MAX_IDLE_S)
    return _Config(
        voice_id=request.match_info["voice_id"],
        output=output_format(query.get("output_format", DEFAULT_FORMAT)),
        auto_mode=query.get("auto_mode", "false").lower() == "true",
        context_clock=query.get("sync_alignment", "false").lower() == "true",
        idle_s=idle_s,
        single=single,
    )


class _Clock:
    """Alignment times in ms: from the context's start, or chunk-relative as ElevenLabs sends
    them: from the end of the last character sent before, which is where a client that adds up
    each message's span (Pipecat) has its clock. Whole milliseconds, as ElevenLabs'."""

    def __init__(self, context_clock: bool) -> None:
        self.context_clock = context_clock
        self.origin = 0  # where the last character sent ends
        self.last_start = 0  # where it starts: no character starts before (rounding)

    def alignment(
        self, chars: list[str], starts_ms: list[float], durations_ms: list[float]
    ) -> dict[str, Any] | None:
        if not chars:
            return None
        base = 0 if self.context_clock else self.origin
        floor, end = max(self.last_start, base), base
        starts, durations = [], []
        for start_ms, duration_ms in zip(starts_ms, durations_ms, strict=True):
            floor = max(round(start_ms), floor)
            end = max(round(start_ms + duration_ms), floor)
            starts.append(floor - base)
            durations.append(end - floor)
        self.origin, self.last_start = max(self.origin, end), floor
        return {"chars": chars, "charStartTimesMs": starts, "charDurationsMs": durations}


class _Voice:
    """A context's listener: its audio in the connection's format, with its alignment."""

    def __init__(self, protocol: _ElevenLabs, name: str) -> None:
        self.protocol, self.name = protocol, name
        config = cast(_Config, protocol.config)
        self.auto_mode = config.auto_mode
        self.out = AudioOut(config.output)
        self.clock = _Clock(config.context_clock)
        self.speaker: Speaker | None = None
        self.last_char = " "  # of the text fed so far
        # Text came after the client's last flush: a close_context now is a barge-in (Pipecat
        # and LiveKit flush a turn's end before closing it, and close an interrupted one).
        self.unflushed = False
        self.interrupted = False

    # -- text in ------------------------------------------------------------------------------

    def feed(self, text: str, flush: bool) -> None:
        """A text message: with auto_mode a whole phrase, spoken at once (and kept apart from
        the one before: Pipecat sends sentences with no space between); else text as written."""
        assert self.speaker is not None
        self.unflushed = not flush
        if self.auto_mode and not text.isspace():
            if not self.last_char.isspace() and not text[0].isspace():
                text = " " + text
            flush = True
        self.speaker.feed(text, flush)
        self.last_char = text[-1]

    # -- audio out ----------------------------------------------------------------------------

    async def audio(self, piece: AudioPiece) -> None:
        data = self.out.feed(piece.pcm)
        alignment = self.clock.alignment(piece.chars, piece.char_start_ms, piece.char_duration_ms)
        await self._audio(data, alignment)

    async def checked(self, segment: int, checks: list[dict[str, Any]]) -> None:
        """Not a part of this protocol: its clients hear the segment as it was sent."""

    async def segment_end(self, segment: SpokenSegment) -> None:
        # A space after each segment: its last word is whole for a client that splits words
        # on spaces (the next segment's text has none before it).
        await self._audio(b"", self.clock.alignment([" "], [segment.end_ms], [0.0]))

    async def cleared(self) -> None:
        self.protocol.connection.drop(self.name)

    async def finished(self, segments: int, audio_ms: float) -> None:
        tail = self.out.close()
        if not self.interrupted:  # nothing of an interrupted turn after its close
            await self._audio(tail, None)
        connection = self.protocol.connection
        if self.speaker is not None:
            connection.forget(self.name, self.speaker)
        await self.protocol.final(self.name)

    async def failed(self, error: ApiError) -> None:
        await self.protocol.error(self.name, error)

    async def _audio(self, data: bytes, alignment: dict[str, Any] | None) -> None:
        if not data and alignment is None:
            return
        frame = {
            "audio": base64.b64encode(data).decode(),
            "alignment": alignment,
            "normalizedAlignment": alignment,
            **_tag(self.name),
        }
        text = dumps(frame)
        await self.protocol.connection.send(text, key=self.name, size=len(text))


class _ElevenLabs:
    """ElevenLabs' protocol over a LiveConnection: its contexts are the connection's."""

    def __init__(self, connection: LiveConnection, config: _Config | ApiError) -> None:
        self.connection, self.config = connection, config
        self.app = connection.app
        self._voice: str | None = None
        self._voice_checked = False

    async def run(self) -> None:
        if isinstance(self.config, ApiError):  # before any audio: said, then closed
            await self.connection.ws.send_str(dumps(_error_frame(self.config, None)))
            await self.connection.close(WSCloseCode.POLICY_VIOLATION, self.config.code)
            return
        if self.config.idle_s is not None:
            self.connection.idle_s = self.config.idle_s
        await self.connection.serve(self._handle, self._idle, self._binary)

    @property
    def single(self) -> bool:
        return cast(_Config, self.config).single

    # -- frames out ---------------------------------------------------------------------------

    async def final(self, name: str) -> None:
        """The context's audio is all out (or it had none): `isFinal`; stream-input closes."""
        await self.connection.send(dumps({"isFinal": True, **_tag(name)}), key=name)
        if self.single:
            await self.connection.close_after_sent()

    async def error(self, name: str | None, error: ApiError) -> None:
        await self.connection.send(dumps(_error_frame(error, name)))

    async def _idle(self, name: str) -> None:
        error = ApiError(
            408,
            f"context {name!r} was idle for {self.connection.idle_s:.0f} s (no text, nothing to "
            "speak) and was closed; text sent to it opens it again",
            code="context_idle",
        )
        # Not the context's own error on multi-stream-input: a plugin would fail its turn,
        # whose audio is all out, over a context that reopens when it is written to.
        await self.error(name if self.single else None, error)
        if self.single:
            await self.connection.close_after_sent(WSCloseCode.POLICY_VIOLATION)

    async def _binary(self) -> None:
        await self.error(None, ApiError(400, "send JSON text frames", code="binary_not_accepted"))

    # -- frames in ----------------------------------------------------------------------------

    async def _handle(self, data: str) -> None:
        name: str | None = None

        async def work() -> None:
            nonlocal name
            msg = json_frame(data)
            name = self._context_name(msg)
            await self._message(msg, name)

        await self.connection.answered(work(), lambda error: self.error(name, error))

    def _context_name(self, msg: dict[str, Any]) -> str:
        if self.single:
            return ""
        name = msg.get("context_id", "")
        if not isinstance(name, str) or len(name) > MAX_CONTEXT_ID:
            raise ApiError(
                422,
                f"'context_id' must be a string of at most {MAX_CONTEXT_ID} characters",
                code="invalid_context_id",
                param="context_id",
            )
        return name

    async def _message(self, msg: dict[str, Any], name: str) -> None:
        if msg.get("close_socket") is True and not self.single:
            for context in list(self.connection.contexts):
                await self.connection.close_context(context)
            await self.connection.close_after_sent()
            return
        text, flush = msg.get("text"), msg.get("flush", False)
        if text is not None and not isinstance(text, str):
            raise ApiError(422, "'text' must be a string", code="invalid_text", param="text")
        if not isinstance(flush, bool):
            raise ApiError(422, "'flush' must be true or false", code="invalid_flush")
        speaker = self.connection.contexts.get(name)
        if text:
            voice = cast(_Voice, speaker.listener) if speaker else await self._open(name, msg)
            voice.feed(text, flush)
        elif speaker is not None and not speaker.ended:
            if text == "" and self.single:  # stream-input's end of input
                speaker.end()
            elif flush:
                speaker.flush()
                cast(_Voice, speaker.listener).unflushed = False
            elif text == "":
                speaker.feed("")  # a keep-alive: the context is not idle
        elif text == "" and self.single:
            await self.final(name)  # the end of an input that never began
        if msg.get("close_context") is True:
            await self._close_context(name)

    async def _close_context(self, name: str) -> None:
        """After a flush, the end of a turn: the rest is spoken, then `isFinal`. With text sent
        since the last flush, an interruption: the segment in the making is cancelled and the
        rest dropped (their device time freed), no more of its audio is sent, then `isFinal`."""
        speaker = self.connection.contexts.get(name)
        if speaker is None:
            await self.final(name)  # nothing open (or all said): final at once
        elif not speaker.ended:
            voice = cast(_Voice, speaker.listener)
            if voice.unflushed:
                voice.interrupted = True
                await speaker.clear()
            speaker.end()

    async def _open(self, name: str, msg: dict[str, Any]) -> _Voice:
        voice_id = cast(_Config, self.config).voice_id
        if not self._voice_checked:
            self._voice = await voice_of(self.app[QUEUE], voice_id, self.connection.client)
            self._voice_checked = True
        given: dict[str, Any] = {"voice": self._voice, "seed": seed_of(voice_id)}
        speed = speed_of(msg.get("voice_settings"))
        if speed is not None:
            given["speed"] = speed
        options = await live_options(self.app, self.connection.client, given)
        listener = _Voice(self, name)
        listener.speaker = self.connection.open(name, options, listener)
        return listener


def _tag(name: str | None) -> dict[str, str]:
    return {"contextId": name} if name else {}


def _error_frame(error: ApiError, name: str | None) -> dict[str, Any]:
    return {"error": error.code, "message": error.message, **_tag(name)}
