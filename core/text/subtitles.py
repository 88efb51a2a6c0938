"""Subtitle files from cues (`{"index", "start", "end", "text"}`, in seconds), written by `srt`
and `webvtt-py`: for the web tier's subtitles route, and for the CLI without the web tier."""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

import srt
import webvtt

# The subtitle formats and their media types.
SUBTITLE_FORMATS = {
    "srt": "application/x-subrip",
    "vtt": "text/vtt",
    "json": "application/json",
}


def to_srt(cues: Sequence[Mapping[str, Any]]) -> str:
    return str(
        srt.compose(
            srt.Subtitle(
                index=cue["index"],
                start=datetime.timedelta(seconds=cue["start"]),
                end=datetime.timedelta(seconds=cue["end"]),
                content=_lines(cue["text"]),
            )
            for cue in cues
        )
    )


def to_vtt(cues: Sequence[Mapping[str, Any]]) -> str:
    document = webvtt.WebVTT()
    for cue in cues:
        document.captions.append(
            webvtt.Caption(_vtt_time(cue["start"]), _vtt_time(cue["end"]), _vtt_text(cue["text"]))
        )
    content: str = document.content
    return content


def _lines(text: str) -> str:
    """A cue's text as both formats take it: no empty line (it would end the cue)."""
    return "\n".join(line for line in text.splitlines() if line.strip())


def _vtt_text(text: str) -> str:
    """WebVTT's cue text: "-->" is its timing arrow and "<", "&" start tags and references
    (the library checks, it does not escape)."""
    escaped = _lines(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return escaped.replace("--&gt;", "→")


def _vtt_time(seconds: float) -> str:
    millis = round(seconds * 1000)
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    return f"{hours:02d}:{minutes:02d}:{rest // 1000:02d}.{rest % 1000:03d}"
