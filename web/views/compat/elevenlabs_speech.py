"""ElevenLabs' text-to-speech HTTP API, so that its SDKs and the agents built on them (LiveKit's
`synthesize()`, Pipecat's HTTP service) speak with this service by a change of base URL and key:

    POST /v1/text-to-speech/{voice_id}                        the audio
    POST /v1/text-to-speech/{voice_id}/stream                 the audio, as it is made
    POST /v1/text-to-speech/{voice_id}/with-timestamps        {audio_base64, alignment, ...}
    POST /v1/text-to-speech/{voice_id}/stream/with-timestamps  one such JSON object a line

Query: `output_format` (mp3_44100_128 by default; pcm_*, mp3_*, opus_*, ulaw_8000); the others
(`enable_logging`, `optimize_streaming_latency`) are accepted. Body: `text`, `voice_settings`
(its `speed`), `seed`, `apply_text_normalization` (`off`: read as written); `model_id`,
`language_code`, `previous_text`, `next_text` and the rest of ElevenLabs' fields are accepted and
not used (the voice follows the text's language). Each request is one interactive job, streamed as
it is made; a voice id that is not one of ours reads in our default voice of the text's language.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from typing import Any

import orjson
from aiohttp import web

from core.audio.catalog import OutputFormat
from core.queue.job import MAX_SEED
from web.appkeys import MEMORY, QUEUE
from web.errors import json_response
from web.following import Closing, closing_error, pcm_pieces
from web.intake.bodies import json_body
from web.intake.door import Admitted, Policy, admit, who
from web.intake.elevenlabs import seed_of, speed_of, voice_of
from web.live.elevenlabs_audio import AudioOut, output_format
from web.live.pieces import AlignedPieces, AudioPiece
from web.monitors.memory import address
from web.replies.streamed import Streamed
from web.replies.waiting import unless_gone
from web.schemas.compat_answers import CharacterAlignment, TimedSpeech
from web.schemas.elevenlabs import NORMALIZE, speech_body

DEFAULT_FORMAT = "mp3_44100_128"
# Each request is one interactive job of 16-bit PCM, streamed as it is made, encoded here.
_SPEECH = Policy(hold=True, priority="high", fixed={"format": "pcm", "stream": True})
# Audio handed to the encoder and answered at a time, at most (a second of speech).
PIECE_BYTES = 24_000 * 2
_MIME = {"mp3": "audio/mpeg", "opus": "audio/opus", "pcm": "audio/pcm", "ulaw": "audio/basic"}


# Its routes: (path after the voice id, route name); each answer is streamed but the whole one
# with timestamps (a JSON object).
ROUTES = (
    ("", "elevenlabs_speech"),
    ("/stream", "elevenlabs_speech_stream"),
    ("/with-timestamps", "elevenlabs_speech_timed"),
    ("/stream/with-timestamps", "elevenlabs_speech_stream_timed"),
)


async def speech(request: web.Request) -> web.StreamResponse:
    route = request.match_info.route.name or ""
    fmt = output_format(request.query.get("output_format", DEFAULT_FORMAT))
    by = who(request)
    job = await _job(request, by.client, await json_body(request))
    async with admit(request.app, by, job, _SPEECH) as admitted:
        speech = _Speech(request, admitted, fmt, timed=route.endswith("_timed"))
        if route == "elevenlabs_speech_timed":
            return await speech.whole()
        return await speech.out.answer(speech.stream())


async def _job(request: web.Request, client: str, payload: Any) -> dict[str, Any]:
    """ElevenLabs' body -> our job's fields (422 naming what to fix)."""
    body = speech_body(payload)
    voice_id = request.match_info["voice_id"]
    seed = seed_of(voice_id) if body.seed is None else body.seed % (MAX_SEED + 1)
    job: dict[str, Any] = {"text": body.text, "seed": seed}
    voice = await voice_of(request.app[QUEUE], voice_id, client)
    if voice is not None:
        job["voice"] = voice
    speed = speed_of(body.voice_settings.model_dump() if body.voice_settings else None)
    if speed is not None:
        job["speed"] = speed
    normalize = NORMALIZE[body.apply_text_normalization]
    if normalize is not None:
        job["normalize"] = normalize
    return job


class _Speech:
    """One request's audio in its output format, with each character's time when asked."""

    def __init__(
        self, request: web.Request, admitted: Admitted, fmt: OutputFormat, timed: bool
    ) -> None:
        self.request, self.admitted, self.timed = request, admitted, timed
        job = admitted.request
        self.pieces = AlignedPieces(0, job.text, 0.0, job.speed)
        self.encoder = AudioOut(fmt)
        kind = "text/plain; charset=utf-8" if timed else _MIME[fmt.codec]
        self.out = Streamed(request, admitted.job_id, kind)

    async def _each(self) -> Any:
        """Each piece of the answer: (its encoded audio, its piece of the text's timing)."""
        app, admitted = self.request.app, self.admitted
        pcm_of = pcm_pieces(app, admitted.job_id, admitted.cursor)
        async with contextlib.aclosing(pcm_of) as made:
            async for pcm in made:
                for at in range(0, len(pcm), PIECE_BYTES):
                    piece = self.pieces.next(pcm[at : at + PIECE_BYTES])
                    yield await asyncio.to_thread(self.encoder.feed, piece.pcm), piece
        rest = self.pieces.rest()
        tail = await asyncio.to_thread(self.encoder.close)
        if rest is not None:
            tail = await asyncio.to_thread(self.encoder.feed, rest.pcm) + tail
        yield tail, rest

    async def stream(self) -> None:
        async for data, piece in self._each():
            if not self.timed:
                if data:
                    await self.out.write(data)
            elif data or (piece is not None and piece.chars):
                alignment = _alignment([piece] if piece is not None else [])
                line: TimedSpeech = {
                    "audio_base64": base64.b64encode(data).decode(),
                    "alignment": alignment,
                    "normalized_alignment": alignment,
                }
                await self.out.write(orjson.dumps(line) + b"\n")

    async def whole(self) -> web.StreamResponse:
        """`with-timestamps`: the whole audio in base64 beside every character's times. Its
        bytes count in the memory budget as they come (thrice: the audio, its base64, the
        answer), so that an address's answers being gathered hold what one may hold."""
        audio, pieces, held = bytearray(), [], 0
        memory, source = self.request.app[MEMORY], address(self.request)

        async def collect() -> None:
            nonlocal held
            async for data, piece in self._each():
                memory.take(source, 3 * len(data), "audio to send")
                held += 3 * len(data)
                audio.extend(data)
                if piece is not None:
                    pieces.append(piece)

        try:
            done, _ = await unless_gone(self.request, collect())
            if not done:  # nobody is listening any more
                return web.Response(status=499, headers={"X-Job-Id": self.admitted.job_id})
            alignment = _alignment(pieces)
            encoded = await asyncio.to_thread(base64.b64encode, audio)  # megabytes: off the loop
            body: TimedSpeech = {
                "audio_base64": encoded.decode(),
                "alignment": alignment,
                "normalized_alignment": alignment,
            }
            return json_response(body, headers={"X-Job-Id": self.admitted.job_id})
        except Closing:
            raise closing_error(self.admitted.job_id) from None
        finally:
            memory.give(source, held)


def _alignment(pieces: list[AudioPiece]) -> CharacterAlignment | None:
    """ElevenLabs' character alignment: each character with its start and end in seconds."""
    chars: list[str] = []
    starts: list[float] = []
    ends: list[float] = []
    for piece in pieces:
        for char, start, duration in zip(
            piece.chars, piece.char_start_ms, piece.char_duration_ms, strict=True
        ):
            chars.append(char)
            starts.append(round(start / 1000, 3))
            ends.append(round((start + duration) / 1000, 3))
    if not chars:
        return None
    return {
        "characters": chars,
        "character_start_times_seconds": starts,
        "character_end_times_seconds": ends,
    }
