"""`GET /v1/audio/speech/stream`: vLLM-Omni's text-in WebSocket, over the same live contexts.

Client -> server: {"type": "session.config", "voice"?, "speed"?, "seed"?, ...}, then
{"type": "input.text", "text"} pieces, {"type": "input.done"} (speak the rest: the utterance
ends; more text starts the next one), {"type": "session.close"}.
Server -> client, per sentence: {"type": "audio.start", "utterance_index", "sentence_index",
"sentence_text", "format": "pcm", "sample_rate": 24000}, binary frames of 16-bit PCM,
{"type": "audio.done", "utterance_index", "sentence_index", "total_bytes", "error": false};
per utterance: {"type": "session.done", "utterance_index", "total_sentences"}; and
{"type": "error", "message", "code"} (never fatal).
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web

from core.audio.formats import SAMPLE_RATE
from web.errors import ApiError, dumps
from web.live.connection import LiveConnection, serve
from web.live.options import LiveOptions, live_options
from web.live.pieces import AudioPiece, SpokenSegment
from web.live.speaker import Speaker
from web.replies.sockets import json_frame, unknown_op

log = logging.getLogger("chattts_online.web.live")

CONTEXT = "utterance"
TYPES = ("session.config", "input.text", "input.done", "session.close")


async def speech_stream(request: web.Request) -> web.StreamResponse:
    return await serve(request, _Stream)


class _Utterance:
    """One utterance's listener: a sentence's audio between `audio.start` and `audio.done`."""

    def __init__(self, stream: _Stream, index: int) -> None:
        self.stream, self.index = stream, index
        self.speaker: Speaker | None = None
        self.sentence = 0  # the segment now being sent (1-based; 0: none yet)
        self.sent = 0

    async def audio(self, piece: AudioPiece) -> None:
        if piece.segment != self.sentence:
            self.sentence, self.sent = piece.segment, 0
            await self._frame(
                {
                    "type": "audio.start",
                    "sentence_index": piece.segment - 1,
                    "sentence_text": piece.text,
                    "format": "pcm",
                    "sample_rate": SAMPLE_RATE,
                }
            )
        if piece.pcm:
            self.sent += len(piece.pcm)
            await self.stream.connection.send(None, piece.pcm, CONTEXT, len(piece.pcm))

    async def checked(self, segment: int, checks: list[dict[str, Any]]) -> None:
        """Not a part of this protocol: its clients hear the segment as it was sent."""

    async def segment_end(self, segment: SpokenSegment) -> None:
        done = {"type": "audio.done", "sentence_index": segment.index - 1}
        await self._frame({**done, "total_bytes": self.sent, "error": False})

    async def cleared(self) -> None:
        self.stream.connection.drop(CONTEXT)

    async def finished(self, segments: int, audio_ms: float) -> None:
        if self.speaker is not None:
            self.stream.connection.forget(CONTEXT, self.speaker)
        await self._frame({"type": "session.done", "total_sentences": segments})
        await self.stream.next_utterance()

    async def failed(self, error: ApiError) -> None:
        await self.stream.error(error)

    async def _frame(self, frame: dict[str, Any]) -> None:
        frame["utterance_index"] = self.index
        await self.stream.connection.send(dumps(frame), key=CONTEXT)


class _Stream:
    def __init__(self, connection: LiveConnection) -> None:
        self.connection = connection
        self.options: LiveOptions | None = None
        self.utterances = 0
        self.held: list[str] = []  # text for the next utterance, while the last one ends

    async def run(self) -> None:
        await self.connection.serve(self._handle, self._idle, self._binary)

    async def error(self, error: ApiError) -> None:
        body = error.error()
        frame = {"type": "error", "message": body["message"], "code": body.get("code")}
        await self.connection.send(dumps(frame))

    async def _idle(self, name: str) -> None:
        error = ApiError(408, "the utterance was idle too long and was dropped", code="idle")
        await self.error(error)

    async def _binary(self) -> None:
        await self.error(ApiError(400, "send JSON text frames", code="binary_not_accepted"))

    async def _handle(self, data: str) -> None:
        async def work() -> None:
            await self._message(json_frame(data))

        await self.connection.answered(work(), self.error)

    async def _message(self, msg: dict[str, Any]) -> None:
        kind = msg.get("type")
        connection = self.connection
        if kind == "session.config":
            config = {k: v for k, v in msg.items() if k != "type"}
            self.options = await live_options(connection.app, connection.client, config)
        elif kind == "input.text":
            text = msg.get("text")
            if not isinstance(text, str):
                raise ApiError(422, "'text' must be a string", code="invalid_text", param="text")
            speaker = self.connection.contexts.get(CONTEXT)
            if speaker is not None and speaker.ended:  # the next utterance's: after this one
                self._hold(text)
            else:
                (speaker or await self._speaker()).feed(text)
        elif kind == "input.done":
            speaker = connection.contexts.get(CONTEXT)
            if speaker is not None:
                speaker.end()
        elif kind == "session.close":
            await connection.close(1000, "session closed")
        else:
            raise unknown_op(kind, TYPES, "type")

    def _hold(self, text: str) -> None:
        held = sum(map(len, self.held)) + len(text)
        if held > self.connection.limits.live_pending_chars:
            raise ApiError(
                429,
                f"{held} characters wait for the utterance being spoken to end (at most "
                f"{self.connection.limits.live_pending_chars}): wait for its session.done",
                code="text_ahead_of_speech",
            )
        self.held.append(text)

    async def next_utterance(self) -> None:
        """The text sent while the last utterance ended starts the next one."""
        if self.held:
            text, self.held = "".join(self.held), []
            try:
                (await self._speaker()).feed(text)
            except ApiError as exc:
                await self.error(exc)

    async def _speaker(self) -> Speaker:
        if self.options is None:
            self.options = await live_options(self.connection.app, self.connection.client, {})
        listener = _Utterance(self, self.utterances)
        self.utterances += 1
        speaker = self.connection.open(CONTEXT, LiveOptions(dict(self.options.fields)), listener)
        listener.speaker = speaker
        return speaker
