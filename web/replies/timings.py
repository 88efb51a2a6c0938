"""A job's timings as clients read them: its cues and words, in seconds, from the worker's
placements; its subtitles file (srt, vtt, json) and its words file (captioned speech)."""

from __future__ import annotations

from typing import Any

import orjson

from core.audio.formats import SAMPLE_RATE
from core.queue.job import Job
from core.text.cues import PlacedSegment, segment_cues, word_times
from core.text.subtitles import to_srt, to_vtt
from web.schemas.answers import Cue, TimedText, WordTime


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


def cues_of(text: str, segments: list[PlacedSegment]) -> list[Cue]:
    """A job's cues in seconds, with their text, their characters and their segment."""
    out: list[Cue] = []
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


def words_of(text: str, segments: list[PlacedSegment]) -> tuple[list[WordTime], bool]:
    """Word timestamps in Kokoro's captioned-speech shape (`{"word", "start_time", "end_time"}`
    in seconds), and whether any is estimated: eSpeak NG reports its words' times, ChatTTS
    does not (core/text/cues.py estimates them as it does the cues)."""
    out: list[WordTime] = []
    estimated = False
    for segment in segments:
        estimated = estimated or not segment.words
        for word in word_times(text, segment):
            out.append({"word": word.word, "start_time": word.start, "end_time": word.end})
    return out, estimated


def subtitles_file(job: Job, raw: list[bytes], fmt: str) -> bytes:
    """A job's subtitles in `fmt` (srt, vtt, or json with the words' times), from its cues."""
    segments = placed_segments(job, raw)  # once, for the cues and the words
    cues = cues_of(job.request.text, segments)
    if fmt == "json":
        words, estimated = words_of(job.request.text, segments)
        timed: TimedText = {
            "job_id": job.id,
            "cues": cues,
            "words": words,
            "words_estimated": estimated,
        }
        # What the worker heard in each segment, and the job's counts (docs/checks.md).
        checks = [orjson.loads(cue).get("check") for cue in raw]
        if any(checks):
            timed["checks"] = job.checks
            timed["segment_checks"] = checks
        return orjson.dumps(timed)
    return (to_srt(cues) if fmt == "srt" else to_vtt(cues)).encode()


def words_file(job: Job, raw: list[bytes]) -> bytes:
    """A job's words' times and whether they are estimated, as JSON (captioned speech)."""
    words, estimated = words_of(job.request.text, placed_segments(job, raw))
    return orjson.dumps({"words": words, "estimated": estimated})
