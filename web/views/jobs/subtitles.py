"""`GET /v1/tts/jobs/{id}/subtitles?format=srt|vtt|json`: cues as subtitlers make them (at most
two lines of 42 characters, at most 7 s, cut at sentence, then clause, then word boundaries),
timed on the job's final audio, their text from the job's own text.

The worker places each segment on the final audio (workers/jobs.py `place`): its first and last
sample, its characters in the submitted text (as the job holds it: invisible characters removed,
before any normalization) and, where the engine reports them, its words' times. The cues within
a segment are cut and timed by `core/text/cues.py`; the files are written by
`core/text/subtitles.py` (`srt` and `webvtt-py`), never by hand. Each file is made once per web
process, in a thread, and kept (web/derived.py).
"""

from __future__ import annotations

import functools

from aiohttp import web

from core.queue.job import JobState
from core.text.subtitles import SUBTITLE_FORMATS
from web import job_service
from web.appkeys import DERIVED, QUEUE
from web.errors import ApiError, not_found
from web.monitors.memory import address
from web.replies.sending import disposition
from web.replies.timings import subtitles_file


async def job_subtitles(request: web.Request) -> web.StreamResponse:
    fmt = request.query.get("format", "srt")
    if fmt not in SUBTITLE_FORMATS:
        raise ApiError(
            400,
            f"unknown subtitle format {fmt[:20]!r}: use srt, vtt or json",
            code="invalid_format",
            param="format",
        )
    queue = request.app[QUEUE]
    job = await job_service.get(request.app, request.match_info["job_id"])
    job_id = job.id
    if job.state != JobState.SUCCEEDED:
        raise ApiError(
            409,
            f"the subtitles follow the audio: the job is {job.state.value}",
            code="not_ready" if not job.state.terminal else f"job_{job.state.value}",
            headers={"Retry-After": "1"} if not job.state.terminal else None,
            state=job.state.value,
        )
    derived = request.app[DERIVED]
    data = derived.kept((job_id, fmt))
    if data is None:
        raw = await queue.stored.cues(job_id)
        if not raw:
            raise not_found(
                f"job {job_id} has no subtitles (expired, or made before them)", "no_cues"
            )
        build = functools.partial(subtitles_file, job, raw, fmt)
        data = await derived.get((job_id, fmt), build, address(request))
    headers = {"Content-Disposition": disposition(request, f"tts-{job_id[:8]}.{fmt}")}
    if fmt == "json":
        return web.Response(body=data, content_type=SUBTITLE_FORMATS[fmt])
    return web.Response(
        body=data, content_type=SUBTITLE_FORMATS[fmt], charset="utf-8", headers=headers
    )
