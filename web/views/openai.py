"""`POST /v1/audio/speech`: OpenAI's speech API, served by the same queue as every job.

A request becomes one high-priority job (ahead of bulk submissions). Without `stream_format` the
answer is the whole file once the job succeeds; with `stream_format: "audio"` the audio leaves as
a chunked body as segments finish; with `"sse"` it leaves as `speech.audio.delta` events (base64
chunks) and a final `speech.audio.done` event with usage. Streams are synthesized as PCM and
encoded here, piece by piece, into one continuous file of the asked format (see
workers/stream_encode.py). Errors use OpenAI's JSON shape; a failure after the first audio byte
cuts a chunked body short (an incomplete transfer, never a truncated "success") and is an `error`
event in SSE. A client that goes away stops the wait; its job still completes (and is cached).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import math
from collections.abc import AsyncGenerator, Awaitable
from dataclasses import dataclass
from typing import Any, TypeVar

from aiohttp import web

from workers.audio import mime_type
from workers.batch import SEGMENT_GAP_S
from workers.engines.base import SAMPLE_RATE
from workers.job import SynthesisRequest
from workers.queue import BacklogFull, ClientCapReached, QueueError, Submitted
from workers.stream_encode import StreamEncoder

from ..appkeys import HUB, METRICS, QUEUE
from ..errors import ApiError, dumps
from ..hub import TERMINAL_TYPES, follow
from ..identity import client_id
from ..schemas import json_body, synthesis_request
from .jobs import retry_after_s

T = TypeVar("T")

FORMATS = ("mp3", "opus", "aac", "flac", "wav", "pcm")
STREAM_FORMATS = ("audio", "sse")
MAX_INPUT_CHARS = 4096  # OpenAI's limit, whatever CHATTTS_MAX_TEXT_CHARS says
MAX_INSTRUCTIONS_CHARS = 4096
SPEED_RANGE = (0.25, 4.0)  # what OpenAI accepts
OUR_SPEED = (0.5, 2.0)  # what our engines do: OpenAI's speeds are clamped into it
# OpenAI voice -> (our voice for English text, our voice for Mandarin text). README has the table.
OPENAI_VOICES: dict[str, tuple[str, str]] = {
    "alloy": ("en_female", "zh_female"),
    "ash": ("en_male", "zh_male"),
    "ballad": ("en_male_2", "zh_male_2"),
    "coral": ("en_female_2", "zh_female_2"),
    "echo": ("en_male", "zh_male"),
    "fable": ("en_male_2", "zh_male_2"),
    "onyx": ("en_male_2", "zh_male_2"),
    "nova": ("en_female", "zh_female"),
    "sage": ("en_female_2", "zh_female_2"),
    "shimmer": ("en_female_2", "zh_female"),
    "verse": ("en_male", "zh_male"),
    "marin": ("en_female", "zh_female_2"),
    "cedar": ("en_male", "zh_male_2"),
}
DEFAULT_VOICE = "alloy"  # when `voice` is left out (OpenAI requires it; we are lenient)
PARAMS = ("model", "input", "voice", "response_format", "speed", "instructions", "stream_format")
EXTENSIONS = ("seed", "cache")  # ours: a reproducible sample, and opting out of the result cache
DELTA_BYTES = 32 * 1024  # audio bytes per SSE delta, at most
FRAME_MS = 20  # usage: one output "token" per 20 ms of audio
GONE_POLL_S = 0.25  # how often a waiting request checks that its client is still there


@dataclass(frozen=True)
class Speech:
    """A validated OpenAI request: the job to enqueue and how to answer."""

    request: SynthesisRequest
    format: str  # the response format (a stream's job is synthesized as pcm)
    stream: str | None
    input_chars: int


def _bad(message: str, param: str | None, code: str = "invalid_value") -> ApiError:
    return ApiError(400, message, code=code, param=param)


def mostly_mandarin(text: str) -> bool:
    """True when Chinese characters are at least a quarter of the letters (one character is
    about a word, and a Western word has several letters)."""
    cjk = other = 0
    for ch in text:
        if "\u4e00" <= ch <= "\u9fff" or "\u3400" <= ch <= "\u4dbf":
            cjk += 1
        elif ch.isalpha():
            other += 1
    return cjk > 0 and 3 * cjk >= other


def resolve_voice(voice: Any, text: str) -> str:
    """An OpenAI voice name (by the table and the text's language), a {"id"} object, or ours."""
    if voice is None:
        voice = DEFAULT_VOICE
    if isinstance(voice, dict):
        voice = voice.get("id")
    if not isinstance(voice, str) or not voice.strip():
        raise _bad(
            "'voice' must be a voice name such as 'alloy' or 'zh_female' (GET /v1/voices)",
            "voice",
        )
    name = voice.strip()
    mapped = OPENAI_VOICES.get(name.lower())
    if mapped is None:
        return name
    return mapped[1] if mostly_mandarin(text) else mapped[0]


def _number(payload: dict[str, Any], name: str, default: float) -> float:
    value = payload.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _bad(f"'{name}' must be a number", name)
    return float(value)


def _optional_str(payload: dict[str, Any], name: str, limit: int) -> str | None:
    value = payload.get(name)
    if value is not None and (not isinstance(value, str) or len(value) > limit):
        raise _bad(f"'{name}' must be a string of at most {limit} characters", name)
    return value


async def parse(app: web.Application, payload: Any) -> Speech:
    """OpenAI's body -> our job (400 with OpenAI's error shape for anything wrong)."""
    if not isinstance(payload, dict):
        raise _bad("the body must be a JSON object", None, "invalid_body")
    unknown = sorted(set(payload) - {*PARAMS, *EXTENSIONS})
    if unknown:
        raise _bad(
            f"unrecognized request argument {unknown[0]!r}; the arguments are "
            f"{', '.join(PARAMS)} (and ours: {', '.join(EXTENSIONS)})",
            unknown[0],
            "unknown_parameter",
        )
    model = payload.get("model")
    if not isinstance(model, str) or not model.strip() or len(model) > 256:
        raise _bad("'model' is required: any model name, e.g. 'tts-1'", "model", "missing_model")
    text = payload.get("input")
    if not isinstance(text, str):
        raise _bad("'input' is required: the text to speak", "input", "missing_input")
    fmt = payload.get("response_format") or "mp3"
    if fmt not in FORMATS:
        raise _bad(f"'response_format' must be one of {', '.join(FORMATS)}", "response_format")
    stream = payload.get("stream_format")
    if stream is not None and stream not in STREAM_FORMATS:
        raise _bad("'stream_format' must be 'audio' or 'sse'", "stream_format")
    speed = _number(payload, "speed", 1.0)
    if not SPEED_RANGE[0] <= speed <= SPEED_RANGE[1]:
        raise _bad(
            f"'speed' must be between {SPEED_RANGE[0]} and {SPEED_RANGE[1]} (got {speed})", "speed"
        )
    _optional_str(payload, "instructions", MAX_INSTRUCTIONS_CHARS)  # accepted, not used
    job: dict[str, Any] = {
        "text": text,
        "voice": resolve_voice(payload.get("voice"), text),
        "format": "pcm" if stream else fmt,
        "speed": min(max(speed, OUR_SPEED[0]), OUR_SPEED[1]),
        "priority": "high",
        **{name: payload[name] for name in EXTENSIONS if name in payload},
    }
    try:
        request = await synthesis_request(app[QUEUE], job, MAX_INPUT_CHARS)
    except ApiError as exc:  # our field names and 422 -> OpenAI's names and 400
        param = "input" if exc.param == "text" else exc.param
        message = exc.message.replace("'text'", "'input'")
        raise ApiError(400, message, code=exc.code, param=param) from None
    return Speech(request, fmt, stream, len(request.text))


async def _enqueue(app: web.Application, request: SynthesisRequest, client: str) -> Submitted:
    try:
        submitted = await app[QUEUE].enqueue(request, client)
    except QueueError as exc:
        code = {BacklogFull: "backlog_full", ClientCapReached: "too_many_active_jobs"}.get(
            type(exc), "queue_refused"
        )
        headers = {"Retry-After": str(retry_after_s(exc, app))}
        raise ApiError(exc.status, str(exc), code=code, headers=headers) from None
    app[METRICS].jobs_submitted.inc()
    return submitted


# -- waiting ------------------------------------------------------------------------------------


class _Closing(Exception):
    """The server shuts down before the job ended."""


def _job_error(event: dict[str, Any]) -> ApiError:
    kind = str(event.get("type"))
    job = event.get("job") or {}
    reason = job.get("error") or kind
    if kind == "cancelled":
        return ApiError(409, f"the job was cancelled: {reason}", code="job_cancelled")
    return ApiError(500, f"synthesis failed: {reason}", code=f"job_{kind}")


async def _gone(request: web.Request) -> None:
    """Returns once the client has closed its connection."""
    while True:
        transport = request.transport
        if transport is None or transport.is_closing():
            return
        await asyncio.sleep(GONE_POLL_S)


async def _unless_gone(request: web.Request, work: Awaitable[T]) -> tuple[bool, T | None]:
    """Run `work` until it ends or the client goes away (then it is cancelled): (done, result)."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.create_task(_gone(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in (task, watcher):
            t.cancel()
        await asyncio.gather(task, watcher, return_exceptions=True)
    if task.cancelled():
        return False, None
    return True, task.result()


async def _terminal(app: web.Application, job_id: str, cursor: str | None) -> dict[str, Any]:
    queue = app[QUEUE]
    stream = queue.keys.job_events(job_id)
    async with contextlib.aclosing(follow(queue, app[HUB], stream, cursor, job_id=job_id)) as ev:
        async for _, event in ev:
            if event.get("type") in TERMINAL_TYPES:
                return event
    raise _Closing


async def pcm_pieces(
    app: web.Application, job_id: str, cursor: str | None
) -> AsyncGenerator[bytes, None]:
    """The PCM of a pcm job as it is synthesized: each segment (with the pause the final file has
    between segments) after its `progress` event, or the whole file at `succeeded` (one-segment
    jobs and cache hits). Raises ApiError when the job ends otherwise, _Closing at shutdown."""
    queue = app[QUEUE]
    segments_key = queue.keys.segments(job_id)
    gap = bytes(int(SAMPLE_RATE * SEGMENT_GAP_S) * 2)
    sent = 0
    stream = queue.keys.job_events(job_id)
    async with contextlib.aclosing(follow(queue, app[HUB], stream, cursor, job_id=job_id)) as ev:
        async for _, event in ev:
            kind = event.get("type")
            if kind == "progress":
                segment = event.get("segment") or {}
                index, total = int(segment.get("index", 0)), int(segment.get("total", 0))
                upto = index if total > 1 else 0
            elif kind == "succeeded":
                upto = int((event.get("job") or {}).get("segments_total") or 0) if sent else 0
                if not sent:
                    audio = await queue.audio(job_id)
                    if audio is None:
                        raise ApiError(500, "the job's audio expired", code="audio_expired")
                    yield audio
            elif kind in TERMINAL_TYPES:
                raise _job_error(event)
            else:
                continue
            if upto > sent:
                parts: list[bytes] = await queue.redis.lrange(segments_key, sent, upto - 1)  # type: ignore[assignment]
                for part in parts:
                    yield (gap if sent else b"") + part
                    sent += 1
            if kind == "succeeded":
                return
    raise _Closing


# -- answers ------------------------------------------------------------------------------------


def _closing_error(job_id: str) -> ApiError:
    return ApiError(
        503,
        f"the server is shutting down; job {job_id} goes on: GET /v1/tts/jobs/{job_id}/audio",
        code="server_shutting_down",
        headers={"Retry-After": "1"},
    )


async def speech(request: web.Request) -> web.StreamResponse:
    app = request.app
    params = await parse(app, await json_body(request))
    submitted = await _enqueue(app, params.request, client_id(request))
    job_id, cursor = submitted.job_id, submitted.event_id
    if params.stream is None:
        return await _whole(request, params, job_id, cursor)
    return await _streamed(request, params, job_id, cursor)


async def _whole(
    request: web.Request, params: Speech, job_id: str, cursor: str | None
) -> web.StreamResponse:
    try:
        done, event = await _unless_gone(request, _terminal(request.app, job_id, cursor))
    except _Closing:
        raise _closing_error(job_id) from None
    if not done or event is None:  # nobody is listening any more
        return web.Response(status=499, headers={"X-Job-Id": job_id})
    if event.get("type") != "succeeded":
        raise _job_error(event)
    data = await request.app[QUEUE].audio(job_id)
    if data is None:
        raise ApiError(500, "the job's audio expired", code="audio_expired")
    cached = str((event.get("job") or {}).get("cached")) == "1"
    headers = {
        "Content-Type": mime_type(params.format),
        "X-Job-Id": job_id,
        "X-Cache": "hit" if cached else "miss",
    }
    return web.Response(body=data, headers=headers)


class _Sender:
    """A streamed answer, prepared at its first byte (so that an early failure is a plain error)."""

    def __init__(self, request: web.Request, params: Speech, job_id: str) -> None:
        self.request = request
        self.params = params
        self.job_id = job_id
        self.response: web.StreamResponse | None = None
        self.pcm_bytes = 0

    async def _open(self) -> web.StreamResponse:
        if self.response is None:
            sse = self.params.stream == "sse"
            response = web.StreamResponse(
                headers={
                    "Content-Type": "text/event-stream" if sse else mime_type(self.params.format),
                    "Cache-Control": "no-cache",
                    "X-Job-Id": self.job_id,
                }
            )
            response.enable_chunked_encoding()
            await response.prepare(self.request)
            self.response = response
        return self.response

    async def event(self, event: dict[str, Any]) -> None:
        response = await self._open()
        await response.write(f"event: {event['type']}\ndata: {dumps(event)}\n\n".encode())

    async def send(self, chunk: bytes) -> None:
        if not chunk:
            return
        if self.params.stream == "audio":
            await (await self._open()).write(chunk)
            return
        for start in range(0, len(chunk), DELTA_BYTES):
            piece = base64.b64encode(chunk[start : start + DELTA_BYTES]).decode()
            await self.event({"type": "speech.audio.delta", "audio": piece})

    async def run(self, cursor: str | None) -> None:
        encoder = StreamEncoder(self.params.format, SAMPLE_RATE)
        async with contextlib.aclosing(pcm_pieces(self.request.app, self.job_id, cursor)) as it:
            async for pcm in it:
                self.pcm_bytes += len(pcm)
                await self.send(await asyncio.to_thread(encoder.feed, pcm))
        await self.send(await asyncio.to_thread(encoder.close))
        if self.params.stream == "sse":
            frames = math.ceil(self.pcm_bytes / 2 / SAMPLE_RATE * 1000 / FRAME_MS)
            usage = {
                "input_tokens": self.params.input_chars,
                "output_tokens": frames,
                "total_tokens": self.params.input_chars + frames,
            }
            await self.event({"type": "speech.audio.done", "usage": usage})
        elif self.response is None:
            await self._open()  # no audio at all: still a (empty) successful stream


async def _streamed(
    request: web.Request, params: Speech, job_id: str, cursor: str | None
) -> web.StreamResponse:
    sender = _Sender(request, params, job_id)
    failure: ApiError | None = None
    try:
        await _unless_gone(request, sender.run(cursor))
    except ApiError as exc:
        failure = exc
    except _Closing:
        failure = _closing_error(job_id)
    except ConnectionError:  # the client left while we wrote
        pass
    if sender.response is None:
        if failure is not None:
            raise failure
        return web.Response(status=499, headers={"X-Job-Id": job_id})
    if failure is not None:
        if params.stream == "sse":
            with contextlib.suppress(ConnectionError):
                await sender.event({"type": "error", "error": failure.error()})
        elif request.transport is not None:
            request.transport.close()  # the body ends short: the client sees a broken transfer
    return sender.response
