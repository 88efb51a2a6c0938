"""`GET /v1/tts/jobs/{id}/subtitles?format=srt|vtt|json`: one cue per segment, timed on the job's
final audio (the pauses between segments included), its text from the job's own text.

A segment is a sentence, short sentences merged up to the segment length, or a part of a long
sentence cut at a clause: cue-sized. Cues come from the worker (workers/batch.py `place`):
each segment's first and last sample in the final file and its characters in the submitted text
(the text as the job holds it: invisible characters removed, before any normalization). The
files are written by `core/text/subtitles.py` (`srt` and `webvtt-py`), never by hand.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
from aiohttp import web

from core.audio.formats import SAMPLE_RATE
from core.queue.job import Job, JobState
from core.text.control_tokens import TOKEN_SHAPE
from core.text.subtitles import to_srt, to_vtt
from web import job_service
from web.appkeys import QUEUE
from web.errors import ApiError, json_response, not_found
from web.views.audio import disposition

FORMATS = {"srt": "application/x-subrip", "vtt": "text/vtt", "json": "application/json"}
_SPACES = re.compile(r"\s+")


def cues_of(job: Job, raw: list[bytes]) -> list[dict[str, Any]]:
    """The job's cues in seconds, with their text; segments that share their characters (one
    sentence spelled out into several) make one cue."""
    rate = job.sample_rate or SAMPLE_RATE
    merged: list[dict[str, Any]] = []
    for cue in (orjson.loads(item) for item in raw):
        if merged and (merged[-1]["from"], merged[-1]["to"]) == (cue["from"], cue["to"]):
            merged[-1]["end_sample"] = cue["end"]
            continue
        merged.append({"from": cue["from"], "to": cue["to"], "start_sample": cue["start"]})
        merged[-1]["end_sample"] = cue["end"]
    out = []
    for index, cue in enumerate(merged, start=1):
        text = _SPACES.sub(" ", TOKEN_SHAPE.sub(" ", job.request.text[cue["from"] : cue["to"]]))
        out.append(
            {
                "index": index,
                "start": round(cue["start_sample"] / rate, 3),
                "end": round(cue["end_sample"] / rate, 3),
                "text": text.strip(),
                "from": cue["from"],
                "to": cue["to"],
            }
        )
    return out


async def job_subtitles(request: web.Request) -> web.StreamResponse:
    fmt = request.query.get("format", "srt")
    if fmt not in FORMATS:
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
            extra={"state": job.state.value},
        )
    raw = await queue.stored.cues(job_id)
    if not raw:
        raise not_found(f"job {job_id} has no subtitles (expired, or made before them)", "no_cues")
    cues = cues_of(job, raw)
    if fmt == "json":
        return json_response({"job_id": job_id, "cues": cues})
    body = to_srt(cues) if fmt == "srt" else to_vtt(cues)
    return web.Response(
        text=body,
        content_type=FORMATS[fmt],
        charset="utf-8",
        headers={"Content-Disposition": disposition(request, f"tts-{job_id[:8]}.{fmt}")},
    )
