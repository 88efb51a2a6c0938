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
from typing import Any

import orjson
from aiohttp import web

from core.audio.formats import SAMPLE_RATE
from core.queue.job import Job, JobState
from core.text.cues import PlacedSegment, segment_cues, word_times
from core.text.subtitles import to_srt, to_vtt
from web import job_service
from web.appkeys import DERIVED, QUEUE
from web.errors import ApiError, not_found
from web.monitors.memory import address
from web.views.audio import disposition

FORMATS = {"srt": "application/x-subrip", "vtt": "text/vtt", "json": "application/json"}


def placed_segments(job: Job, raw: list[bytes]) -> list[PlacedSegment]:
    """The worker's placements in seconds; segments that share their characters (one sentence
    spelled out into several) make one."""
    rate = job.sample_rate or SAMPLE_RATE
    merged: list[dict[str, Any]] = []
    for cue in (orjson.loads(item) for item in raw):
        words = [(c, s / rate) for c, s in cue.get("words") or ()]
        if merged and (merged[-1]["from"], merged[-1]["to"]) == (cue["from"], cue["to"]):
            merged[-1]["end"] = cue["end"]
            merged[-1]["words"] += words
            continue
        merged.append({**cue, "words": words})
    return [
        PlacedSegment(m["start"] / rate, m["end"] / rate, m["from"], m["to"], tuple(m["words"]))
        for m in merged
    ]


def cues_of(text: str, segments: list[PlacedSegment]) -> list[dict[str, Any]]:
    """A job's cues in seconds, with their text, their characters and their segment."""
    out: list[dict[str, Any]] = []
    for number, segment in enumerate(segments, start=1):
        for cue in segment_cues(text, segment):
            out.append(
                {
                    "index": len(out) + 1,
                    "start": cue.start,
                    "end": cue.end,
                    "text": cue.text,
                    "from": cue.begin,
                    "to": cue.end_char,
                    "segment": number,
                }
            )
    return out


def words_of(text: str, segments: list[PlacedSegment]) -> tuple[list[dict[str, Any]], bool]:
    """Word timestamps in Kokoro's captioned-speech shape (`{"word", "start_time", "end_time"}`
    in seconds), and whether any is estimated: eSpeak NG reports its words' times, ChatTTS
    does not (core/text/cues.py estimates them as it does the cues)."""
    out: list[dict[str, Any]] = []
    estimated = False
    for segment in segments:
        estimated = estimated or not segment.words
        for word in word_times(text, segment):
            out.append({"word": word.word, "start_time": word.start, "end_time": word.end})
    return out, estimated


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
        return web.Response(body=data, content_type=FORMATS[fmt])
    return web.Response(body=data, content_type=FORMATS[fmt], charset="utf-8", headers=headers)


def subtitles_file(job: Job, raw: list[bytes], fmt: str) -> bytes:
    """A job's subtitles in `fmt` (srt, vtt, or json with the words' times), from its cues."""
    segments = placed_segments(job, raw)  # once, for the cues and the words
    cues = cues_of(job.request.text, segments)
    if fmt == "json":
        words, estimated = words_of(job.request.text, segments)
        timed = {"job_id": job.id, "cues": cues, "words": words, "words_estimated": estimated}
        return orjson.dumps(timed)
    return (to_srt(cues) if fmt == "srt" else to_vtt(cues)).encode()


def words_file(job: Job, raw: list[bytes]) -> bytes:
    """A job's words' times and whether they are estimated, as JSON (captioned speech)."""
    words, estimated = words_of(job.request.text, placed_segments(job, raw))
    return orjson.dumps({"words": words, "estimated": estimated})
