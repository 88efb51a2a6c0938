"""A streaming job's audio as it is made: `GET /v1/tts/jobs/{id}/stream` (what the demo page
plays from), over the chunk reader of web/job_service.py.

`GET /v1/tts/jobs/{id}/stream` answers a job submitted with `"stream": true` with a chunked body
of 16-bit little-endian mono PCM at 24 kHz (`audio/pcm`, the rate also in `X-Sample-Rate`), from
its first sample (or from byte `offset`, to resume a cut download), whenever it is asked: chunks
linger CHUNKS_LINGER_S after the last one. The chunks hold the pauses between segments, so the
body is the job's samples, all of one attempt (a job restarted after its audio began ends the
body short). A job that streamed
nothing (a cache hit) gets an empty body: its file is at `audio_url`. Failures before the first
byte are JSON errors; after it the body ends short (an incomplete transfer).
"""

from __future__ import annotations

import contextlib

from aiohttp import web

from core.audio.catalog import CATALOG
from core.audio.formats import SAMPLE_RATE
from web import job_service
from web.clients.limits import stream_lease
from web.errors import ApiError
from web.following import pcm_pieces
from web.replies.streamed import Streamed
from web.schemas.jobs import valid_job_id


async def job_stream(request: web.Request) -> web.StreamResponse:
    app = request.app
    job_id = valid_job_id(request.match_info["job_id"])
    job = await job_service.get(app, job_id)
    if not job.request.stream:
        raise _not_streamed(job_id)
    skip = _offset(request)
    pieces = pcm_pieces(app, job_id, None, whole_file=job.request.format == "pcm")
    headers = {"Cache-Control": "no-store", "X-Sample-Rate": str(SAMPLE_RATE)}
    out = Streamed(request, job_id, CATALOG["pcm"].mime, headers)

    async def send() -> None:
        nonlocal skip
        async with contextlib.aclosing(pieces) as it:
            async for pcm in it:
                if skip >= len(pcm):
                    skip -= len(pcm)
                    continue
                pcm, skip = pcm[skip:], 0
                await out.write(pcm)  # TimeoutError: not reading
        if out.response is None and skip > 0:  # the offset is past all the stream holds
            raise _past_end(_offset(request) - skip, skip)

    # Nothing streamed (a cache hit): an empty body.
    async with stream_lease(request):
        return await out.answer(send())


def _not_streamed(job_id: str) -> ApiError:
    return ApiError(
        409,
        f'job {job_id} was not submitted with "stream": true, so it sends no audio while it is '
        f"made; its file is at /v1/tts/jobs/{job_id}/audio once it succeeds",
        code="not_streamed",
    )


def _past_end(total: int, beyond: int) -> ApiError:
    return ApiError(
        416,
        f"offset {total + beyond} is past the end of this job's stream ({total} bytes); you "
        "have it all",
        code="offset_past_end",
        headers={"Content-Range": f"bytes */{total}"},
    )


def _offset(request: web.Request) -> int:
    raw = request.query.get("offset", "0")
    # ASCII digits only: str.isdigit() takes "²", which int() refuses.
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 12 or int(raw) % 2:
        raise ApiError(
            400,
            "offset must be an even number of bytes (whole 16-bit samples), as many as you "
            f"already have; got {raw[:20]!r}",
            code="invalid_offset",
        )
    return int(raw)
