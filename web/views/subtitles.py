"""`GET /v1/tts/jobs/{id}/subtitles?format=srt|vtt|json`: one cue per segment, timed on the job's
final audio (the pauses between segments included), its text from the job's own text.

A segment is a sentence, short sentences merged up to the segment length, or a part of a long
sentence cut at a clause: cue-sized. Cues come from the worker (workers/worker/batch.py `place`):
each segment's first and last sample in the final file and its characters in the submitted text
(the text as the job holds it: invisible characters removed, before any normalization). The
files are written by `srt` and `webvtt-py`, never by hand.
"""

from __future__ import annotations

import datetime
import re
from typing import Any

import orjson
import srt
import webvtt
from aiohttp import web

from web.appkeys import QUEUE
from web.errors import ApiError, json_response, not_found
from web.schemas import valid_job_id
from workers.queue.job import Job, JobState
from workers.text.control_tokens import TOKEN_SHAPE

FORMATS = {"srt": "application/x-subrip", "vtt": "text/vtt", "json": "application/json"}
_SPACES = re.compile(r"\s+")


def cues_of(job: Job, raw: list[bytes]) -> list[dict[str, Any]]:
    """The job's cues in seconds, with their text; segments that share their characters (one
    sentence spelled out into several) make one cue."""
    rate = job.sample_rate or 24_000
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


def to_srt(cues: list[dict[str, Any]]) -> str:
    return str(
        srt.compose(
            srt.Subtitle(
                index=cue["index"],
                start=datetime.timedelta(seconds=cue["start"]),
                end=datetime.timedelta(seconds=cue["end"]),
                content=cue["text"],
            )
            for cue in cues
        )
    )


def to_vtt(cues: list[dict[str, Any]]) -> str:
    document = webvtt.WebVTT()
    for cue in cues:
        document.captions.append(
            webvtt.Caption(_vtt_time(cue["start"]), _vtt_time(cue["end"]), cue["text"])
        )
    content: str = document.content
    return content


def _vtt_time(seconds: float) -> str:
    millis = round(seconds * 1000)
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    return f"{hours:02d}:{minutes:02d}:{rest // 1000:02d}.{rest % 1000:03d}"


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
    job_id = valid_job_id(request.match_info["job_id"])
    job = await queue.get(job_id)
    if job is None:
        raise not_found(f"no job with id {job_id!r} (unknown, or expired)", "job_not_found")
    if job.state != JobState.SUCCEEDED:
        raise ApiError(
            409,
            f"the subtitles follow the audio: the job is {job.state.value}",
            code="not_ready" if not job.state.terminal else f"job_{job.state.value}",
            headers={"Retry-After": "1"} if not job.state.terminal else None,
            extra={"state": job.state.value},
        )
    raw: Any = await queue.redis.lrange(queue.keys.cues(job_id), 0, -1)
    if not raw:
        raise not_found(f"job {job_id} has no subtitles (expired, or made before them)", "no_cues")
    cues = cues_of(job, raw)
    if fmt == "json":
        return json_response({"job_id": job_id, "cues": cues})
    body = to_srt(cues) if fmt == "srt" else to_vtt(cues)
    name = f"tts-{job_id[:8]}.{fmt}"
    disposition = "attachment" if request.query.get("download") in ("1", "true") else "inline"
    return web.Response(
        text=body,
        content_type=FORMATS[fmt],
        charset="utf-8",
        headers={"Content-Disposition": f'{disposition}; filename="{name}"'},
    )
