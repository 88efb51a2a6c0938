"""A streaming job's audio as it is made: the PCM chunk reader that the OpenAI stream and
`GET /v1/tts/jobs/{id}/stream` share, and that endpoint (what the demo page plays from).

`GET /v1/tts/jobs/{id}/stream` answers a job submitted with `"stream": true` with a chunked body
of 16-bit little-endian mono PCM at 24 kHz (`audio/pcm`, the rate also in `X-Sample-Rate`), from
its first sample (or from byte `offset`, to resume a cut download), whenever it is asked: chunks
linger CHUNKS_LINGER_S after the last one. The
chunks hold the pauses between segments, so the body is the job's samples. A job that streamed
nothing (a cache hit) gets an empty body: its file is at `audio_url`. Failures before the first
byte are JSON errors; after it the body ends short (an incomplete transfer).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Awaitable
from typing import Any, TypeVar

from aiohttp import web

from core.audio.formats import SAMPLE_RATE, mime_type
from web.appkeys import HUB, QUEUE
from web.errors import ApiError, not_found
from web.hub import TERMINAL_TYPES, follow
from web.schemas.jobs import valid_job_id

T = TypeVar("T")

GONE_POLL_S = 0.25  # how often a waiting request checks that its client is still there


class Closing(Exception):
    """The server shuts down before the job ended."""


def job_error(event: dict[str, Any]) -> ApiError:
    kind = str(event.get("type"))
    job = event.get("job") or {}
    reason = job.get("error") or kind
    if kind == "cancelled":
        return ApiError(409, f"the job was cancelled: {reason}", code="job_cancelled")
    return ApiError(500, f"synthesis failed: {reason}", code=f"job_{kind}")


async def gone(request: web.Request) -> None:
    """Returns once the client has closed its connection."""
    while True:
        transport = request.transport
        if transport is None or transport.is_closing():
            return
        await asyncio.sleep(GONE_POLL_S)


async def unless_gone(request: web.Request, work: Awaitable[T]) -> tuple[bool, T | None]:
    """Run `work` until it ends or the client goes away (then it is cancelled): (done, result)."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.create_task(gone(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in (task, watcher):
            t.cancel()
        await asyncio.gather(task, watcher, return_exceptions=True)
    if task.cancelled():
        return False, None
    return True, task.result()


async def pcm_pieces(
    app: web.Application, job_id: str, cursor: str | None, *, whole_file: bool = True
) -> AsyncGenerator[bytes, None]:
    """The PCM of a streaming job as it is synthesized: its chunks, in order, as their `audio`
    events arrive; at `succeeded` those not read yet (its `chunks_done`), or, with `whole_file`
    (a job whose file is PCM), the whole file when it streamed none (a cache hit). Chunks hold
    the pauses between segments: they join into the final file. Raises ApiError when the job
    ends otherwise, or when it starts again after audio went out (what was sent cannot be taken
    back); Closing at shutdown."""
    queue = app[QUEUE]
    sent = 0
    attempt: int | None = None
    stream = queue.keys.job_events(job_id)
    async with contextlib.aclosing(follow(queue, app[HUB], stream, cursor, job_id=job_id)) as ev:
        async for _, event in ev:
            kind, job = event.get("type"), event.get("job") or {}
            if kind == "audio":
                upto = int((event.get("chunk") or {}).get("index", 0))
                if attempt is not None and job.get("attempts") != attempt:
                    raise ApiError(
                        503,
                        f"job {job_id} started again after its audio began; retry the request",
                        code="job_restarted",
                    )
                attempt = job.get("attempts")
            elif kind == "succeeded":
                upto = int(job.get("chunks_done") or 0)
                if not upto and not sent and whole_file:
                    audio = await queue.stored.file(job_id)
                    if audio is None:
                        raise ApiError(500, "the job's audio expired", code="audio_expired")
                    yield audio
                    return
            elif kind in TERMINAL_TYPES:
                raise job_error(event)
            else:
                continue
            if upto > sent:
                for part in await queue.stored.chunks(job_id, sent, upto - 1):
                    yield part
                    sent += 1
            if kind == "succeeded":
                return
    raise Closing


# -- answers ------------------------------------------------------------------------------------


def closing_error(job_id: str) -> ApiError:
    return ApiError(
        503,
        f"the server is shutting down; job {job_id} goes on: GET /v1/tts/jobs/{job_id}/audio",
        code="server_shutting_down",
        headers={"Retry-After": "1"},
    )


async def job_stream(request: web.Request) -> web.StreamResponse:
    app = request.app
    job_id = valid_job_id(request.match_info["job_id"])
    job = await app[QUEUE].get(job_id)
    if job is None:
        raise not_found(f"no job with id {job_id!r} (unknown, or expired)", "job_not_found")
    if not job.request.stream:
        raise ApiError(
            409,
            f'job {job_id} was not submitted with "stream": true, so it sends no audio while it '
            f"is made; its file is at /v1/tts/jobs/{job_id}/audio once it succeeds",
            code="not_streamed",
        )
    skip = _offset(request)
    response: web.StreamResponse | None = None
    failure: ApiError | None = None
    pieces = pcm_pieces(app, job_id, None, whole_file=job.request.format == "pcm")

    async def send() -> None:
        nonlocal response, skip
        async with contextlib.aclosing(pieces) as it:
            async for pcm in it:
                if skip >= len(pcm):
                    skip -= len(pcm)
                    continue
                pcm, skip = pcm[skip:], 0
                if response is None:
                    response = await _open(request, job_id)
                await response.write(pcm)

    try:
        await unless_gone(request, send())
    except ApiError as exc:
        failure = exc
    except Closing:
        failure = closing_error(job_id)
    except ConnectionError:  # the client left while we wrote
        return response or web.Response(status=499)
    if response is None:
        if failure is not None:
            raise failure
        return await _open(request, job_id)  # nothing streamed (a cache hit): an empty body
    if failure is not None and request.transport is not None:
        request.transport.close()  # the body ends short: the client sees a broken transfer
    return response


def _offset(request: web.Request) -> int:
    raw = request.query.get("offset", "0")
    if not raw.isdigit() or len(raw) > 12 or int(raw) % 2:
        raise ApiError(
            400,
            "offset must be an even number of bytes (whole 16-bit samples), as many as you "
            f"already have; got {raw[:20]!r}",
            code="invalid_offset",
        )
    return int(raw)


async def _open(request: web.Request, job_id: str) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={
            "Content-Type": mime_type("pcm"),
            "Cache-Control": "no-store",
            "X-Sample-Rate": str(SAMPLE_RATE),
            "X-Job-Id": job_id,
        }
    )
    response.enable_chunked_encoding()
    await response.prepare(request)
    return response
