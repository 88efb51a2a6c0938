"""`POST /v1/audio/speech`: OpenAI's speech API, served by the same queue as every job.

A request becomes one interactive job (high priority with an API key, ahead of bulk work). Without
`stream_format` the answer is the whole file once the job succeeds; with `stream_format: "audio"`
the audio leaves as a chunked body as segments finish; with `"sse"` it leaves as
`speech.audio.delta` events (base64 chunks) and a final `speech.audio.done` event with usage.
Streams are synthesized as PCM and encoded here, piece by piece, into one continuous file of the
asked format (see core/audio/stream_encode.py). Errors use OpenAI's JSON shape; a failure after the
first audio byte cuts a chunked body short (an incomplete transfer, never a truncated "success")
and is an `error` event in SSE. A client that goes away stops the wait; its job still completes
(and is cached).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import math
from typing import Any

import numpy as np
from aiohttp import web

from core.audio.catalog import AV_FORMATS, CATALOG
from core.audio.formats import SAMPLE_RATE, bare_mp3
from core.audio.stream_encode import StreamEncoder
from web.appkeys import ENCODING, QUEUE
from web.errors import ApiError, dumps
from web.following import pcm_pieces
from web.intake.bodies import json_body
from web.intake.speech import admit_speech
from web.monitors.memory import address
from web.replies.sending import holding, send_bytes
from web.replies.streamed import Streamed
from web.replies.waiting import succeeded
from web.schemas.openai import Speech

DELTA_BYTES = 32 * 1024  # audio bytes per SSE delta, at most
FRAME_MS = 20  # usage: one output "token" per 20 ms of audio
# PCM encoded per call off the loop: about 5 s of audio, so that a whole cached answer is paced
# and encoded piece by piece, never in one call of seconds.
ENCODE_PIECE_BYTES = 256 * 1024


async def speech(request: web.Request) -> web.StreamResponse:
    # An answer is an open connection while its job is made: it holds a lease like the event
    # streams, taken before the job is queued (past the cap, a plain 429).
    async with admit_speech(request, await json_body(request)) as (params, admitted):
        if params.stream is None:
            return await _whole(request, params, admitted.job_id, admitted.cursor)
        return await _streamed(request, params, admitted.job_id, admitted.cursor)


async def _whole(
    request: web.Request, params: Speech, job_id: str, cursor: str | None
) -> web.StreamResponse:
    finished = await succeeded(request, job_id, cursor)
    if finished is None:
        return web.Response(status=499, headers={"X-Job-Id": job_id})
    with holding(request, int(finished.get("audio_size") or 0)):
        data = await request.app[QUEUE].stored.file(job_id)
        if data is None:
            raise ApiError(500, "the job's audio expired", code="audio_expired")
        if params.format == "mp3":  # answers join by concatenation (Home Assistant's pieces)
            data = bare_mp3(data)
        headers = {
            "Content-Type": CATALOG[params.format].mime,
            "X-Job-Id": job_id,
            "X-Cache": "hit" if finished.get("cached") is True else "miss",
        }
        if params.download_link:  # Kokoro's header: where the same file can be fetched again
            headers["X-Download-Path"] = str(request.app.router["job_audio"].url_for(job_id=job_id))
        return await send_bytes(request, data, headers)


class _Sender:
    """A streamed answer's audio: chunks of the asked format, or SSE deltas of them."""

    def __init__(self, request: web.Request, params: Speech, job_id: str) -> None:
        self.request = request
        self.params = params
        sse = params.stream == "sse"
        self.out = Streamed(
            request, job_id, "text/event-stream" if sse else CATALOG[params.format].mime
        )
        self.pcm_bytes = 0
        self.source = address(request)

    async def event(self, event: dict[str, Any]) -> None:
        await self.out.write(f"event: {event['type']}\ndata: {dumps(event)}\n\n".encode())

    async def error(self, failure: ApiError) -> None:
        await self.event({"type": "error", "error": failure.error()})

    async def send(self, chunk: bytes) -> None:
        if not chunk:
            return
        if self.params.stream == "audio":
            await self.out.write(chunk)
            return
        for start in range(0, len(chunk), DELTA_BYTES):
            piece = base64.b64encode(chunk[start : start + DELTA_BYTES]).decode()
            await self.event({"type": "speech.audio.delta", "audio": piece})

    def _encode(self, encoder: StreamEncoder, pcm: bytes) -> bytes:
        if self.params.gain != 1.0:  # Kokoro's volume_multiplier: scaled, then clipped
            samples = np.frombuffer(pcm, dtype="<i2").astype(np.float32) * self.params.gain
            pcm = np.clip(samples, -32768, 32767).astype("<i2").tobytes()
        return encoder.feed(pcm)

    async def run(self, cursor: str | None) -> None:
        encoder = StreamEncoder(self.params.format, SAMPLE_RATE)
        compressed = self.params.format in AV_FORMATS
        pieces = pcm_pieces(self.request.app, self.out.job_id, cursor)
        async with contextlib.aclosing(pieces) as it:
            async for pcm in it:
                self.pcm_bytes += len(pcm)
                for start in range(0, len(pcm), ENCODE_PIECE_BYTES):
                    piece = pcm[start : start + ENCODE_PIECE_BYTES]
                    if compressed:  # paced per address: a cached answer is encoded at once
                        await self.request.app[ENCODING].pace(self.source, len(piece))
                    await self.send(await asyncio.to_thread(self._encode, encoder, piece))
        await self.send(await asyncio.to_thread(encoder.close))
        if self.params.stream == "sse":
            frames = math.ceil(self.pcm_bytes / 2 / SAMPLE_RATE * 1000 / FRAME_MS)
            usage = {
                "input_tokens": self.params.input_chars,
                "output_tokens": frames,
                "total_tokens": self.params.input_chars + frames,
            }
            await self.event({"type": "speech.audio.done", "usage": usage})


async def _streamed(
    request: web.Request, params: Speech, job_id: str, cursor: str | None
) -> web.StreamResponse:
    sender = _Sender(request, params, job_id)
    tail = sender.error if params.stream == "sse" else None  # SSE tells; a body is cut short
    return await sender.out.answer(sender.run(cursor), tail)
