"""The formats of registered voices' data, by the name an engine's capabilities give (its
heartbeat's `voice_data`): how the web tier checks a registration and packs a recording."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from core.voices import chattts


@dataclass(frozen=True)
class VoiceFormat:
    """One format: `check` gives the data's kind or raises ValueError saying what is wrong;
    `from_recording(audio, rate, transcript)` packs a reference recording as data of it."""

    name: str
    what: str  # what a client sends as `embedding`, for messages
    check: Callable[[str], str]
    from_recording: Callable[[np.ndarray, int, str], str]
    recording_s: tuple[float, float]  # the shortest and longest recording it takes
    max_transcript_chars: int


FORMATS = {
    "chattts": VoiceFormat(
        "chattts",
        "a ChatTTS speaker embedding string",
        chattts.validate_voice_data,
        chattts.recording_voice_data,
        (chattts.MIN_RECORDING_S, chattts.MAX_RECORDING_S),
        chattts.MAX_TRANSCRIPT_CHARS,
    ),
}


def formats_for(names: frozenset[str]) -> list[VoiceFormat]:
    """The formats of `names` this service knows; every format it knows when it knows none of
    them (no live worker speaks registered voices yet: the worker checks the data again)."""
    known = [FORMATS[name] for name in sorted(names) if name in FORMATS]
    return known or list(FORMATS.values())
