"""A segment's audio in pieces, each with the characters it covers and their times in the
context's audio: estimated from the text before the segment's end is known."""

from __future__ import annotations

from dataclasses import dataclass

from core.audio.formats import SAMPLE_RATE
from core.audio.sizes import speech_seconds
from core.text.alignment import char_times, words_of

BYTES_PER_MS = SAMPLE_RATE * 2 / 1000  # 16-bit mono PCM
# How much faster than `core/audio/sizes.speech_seconds` (a slow speaking rate, so that storage
# estimates err large) speech usually is: the alignment's first guess of a segment's length.
TYPICAL_PACE = 1.3


@dataclass(frozen=True)
class AudioPiece:
    """PCM of one segment (16-bit little-endian mono at 24 kHz) and the characters it covers,
    times in the context's audio (ms)."""

    segment: int
    pcm: bytes
    start_ms: float
    duration_ms: float
    chars: list[str]
    char_start_ms: list[float]
    char_duration_ms: list[float]
    text: str = ""  # the whole segment's text


@dataclass(frozen=True)
class SpokenSegment:
    """A segment whose audio is all out: its text, where it lies in the context's audio, and
    its words' times (an estimate spread over the segment's real length)."""

    index: int
    text: str
    start_ms: float
    end_ms: float
    words: list[tuple[str, float, float]]


class AlignedPieces:
    """A segment's audio pieces with the characters each covers: first by an estimate of the
    segment's length, and what is left when its audio ends goes with a last, empty piece."""

    def __init__(self, index: int, text: str, start_ms: float, speed: float) -> None:
        self.index, self.text, self.start_ms = index, text, start_ms
        estimate_ms = speech_seconds(text) * 1000 / TYPICAL_PACE / max(speed, 0.1)
        self.chars, self.starts, self.durations = char_times(text, estimate_ms)
        self.given = 0  # characters handed out
        self.made_ms = 0.0  # the segment's audio so far

    def next(self, pcm: bytes) -> AudioPiece:
        begin = self.made_ms
        duration = len(pcm) / BYTES_PER_MS
        self.made_ms += duration
        upto = self.given
        while upto < len(self.chars) and self.starts[upto] < self.made_ms:
            upto += 1
        return self._piece(pcm, begin, duration, upto)

    def rest(self) -> AudioPiece | None:
        if self.given >= len(self.chars):
            return None
        return self._piece(b"", self.made_ms, 0.0, len(self.chars))

    def _piece(self, pcm: bytes, begin: float, duration: float, upto: int) -> AudioPiece:
        end = begin + duration
        picked = range(self.given, upto)
        starts = [min(max(self.starts[i], begin), end) for i in picked]
        lengths = [
            min(self.durations[i], max(end - s, 0.0)) for i, s in zip(picked, starts, strict=True)
        ]
        self.given = upto
        base = self.start_ms
        return AudioPiece(
            segment=self.index,
            pcm=pcm,
            start_ms=base + begin,
            duration_ms=duration,
            chars=[self.chars[i] for i in picked],
            char_start_ms=[round(base + s, 1) for s in starts],
            char_duration_ms=[round(d, 1) for d in lengths],
            text=self.text,
        )

    def spoken(self) -> SpokenSegment:
        chars, starts, durations = char_times(self.text, self.made_ms)
        words = [
            (word, round(self.start_ms + s, 1), round(self.start_ms + e, 1))
            for word, s, e in words_of(chars, starts, durations)
        ]
        return SpokenSegment(
            self.index, self.text, self.start_ms, self.start_ms + self.made_ms, words
        )
