"""What every engine provides (`Engine`: load, warm up, list voices, synthesize a batch of
segments), and what a continuously batching one adds (`ContinuousEngine`: segments submitted one
by one while its thread serves them, results handed back one by one)."""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import numpy as np

from core.audio.formats import SAMPLE_RATE
from core.queue.job import SynthesisRequest
from core.queue.voices import Voice

__all__ = [
    "SAMPLE_RATE",
    "ChunkSink",
    "ContinuousEngine",
    "Engine",
    "EngineError",
    "PlaybackClock",
    "Segment",
    "SegmentResult",
    "as_continuous",
]


# (segment text as the engine speaks it, start, end): offsets into the text as submitted.
Pieces = list[tuple[str, int, int]]


class EngineError(Exception):
    """A synthesis failure. `retryable` says whether another attempt could succeed."""

    def __init__(self, message: str, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


@dataclass(frozen=True)
class Segment:
    """One piece of one job's text, synthesized as one row of a batch."""

    job_id: str
    index: int  # 0-based position within its job
    text: str
    request: SynthesisRequest
    voice_data: str | None = None  # a registered voice's stored speaker embedding, if any
    # Where the engine reports them: each word's first character in `text` and first sample in
    # the segment's audio, written by the engine thread before it hands the audio back.
    words: list[tuple[int, int]] = field(default_factory=list, compare=False, hash=False)


# (segment, audio piece, final): a piece of a segment's audio as soon as the engine has it.
ChunkSink = Callable[["Segment", np.ndarray, bool], None]


class PlaybackClock:
    """A streamed job's listener, as the worker sees it: seconds of audio sent since its first
    chunk, against the wall time since; and the seconds each of the job's segments is expected
    to make (the runtime holds a stream's first audio until the rest can follow without a gap).
    Written by the event loop, read by the engine thread (floats: a stale read is a step late,
    never wrong)."""

    def __init__(self, expected_s: Sequence[float] = (), eager: bool = False) -> None:
        self.first_at: float | None = None  # time.monotonic() of the first chunk out
        self.sent_s = 0.0
        self.eager = eager  # first audio at once, gaps or not
        self._expected = list(expected_s)
        # Seconds after each segment: the sums of the tails, last first.
        tails = itertools.accumulate(reversed([*self._expected[1:], 0.0]))
        self._after = list(reversed(list(tails)))
        self.segment = 0  # the segment in the engine now (Continuous.feed sets it)
        self.gaps_s = 0.0  # what a listener who plays from the first chunk waited, all told

    @property
    def segment_s(self) -> float:
        """Expected seconds of the segment in the engine now (inf: not known)."""
        return self._expected[self.segment] if self.segment < len(self._expected) else math.inf

    @property
    def later_s(self) -> float:
        """Expected seconds of the job's segments after it."""
        return self._after[self.segment] if self.segment < len(self._after) else 0.0

    def sent(self, seconds: float) -> float:
        """`seconds` of audio went out; the gap it ends (seconds a listener who pauses when
        it runs dry waited for it, 0 when it was in time)."""
        now = time.monotonic()
        if self.first_at is None:
            self.first_at = now
        gap = max(0.0, now - self.first_at - self.sent_s - self.gaps_s)
        self.gaps_s += gap
        self.sent_s += seconds
        return gap

    def margin(self, now: float) -> float | None:
        """Seconds of audio the listener has in hand (negative: it has been waiting that long);
        None before the first chunk."""
        first = self.first_at
        return None if first is None else self.sent_s - (now - first)


class SegmentResult(Protocol):
    """What a continuously batching engine hands back for one segment."""

    audio: np.ndarray
    truncated: bool
    error: str | None  # "cancelled", or why the segment failed


class Engine(Protocol):
    """All methods are called from the worker's single engine thread, never concurrently."""

    name: str
    model_version: str
    sample_rate: int
    max_batch: int
    # The same text, voice and parameters always give the same samples: results of unseeded
    # requests may be cached too.
    deterministic: bool
    # It speaks registered voices (their stored speaker data); else only the built-in names.
    registered_voices: bool
    # What the worker should log about the last `synthesize` (a segment cut short, ...).
    last_warnings: list[str]

    @property
    def continuous(self) -> bool:
        """True when this engine serves segments continuously (a ContinuousEngine) as loaded."""

    def stats(self) -> dict[str, Any]:
        """The engine's own counters, published in the worker's heartbeat."""

    def load(self) -> None:
        """Load weights; raises EngineError naming what is missing or corrupt."""

    def warmup(self) -> None:
        """Run one real synthesis so the first job does not pay for lazy initialisation."""

    def voices(self) -> list[Voice]:
        """Voices this engine can speak with (built-in names at least)."""

    def pieces(self, text: str, request: SynthesisRequest, language: str | None = None) -> Pieces:
        """Cut a job's text into segments synthesized (and streamed) one by one, with where each
        lies in `text`: (segment, start, end) character offsets into the text as submitted
        (subtitle cues point there). `language` (a BCP 47 tag) is a registered voice's;
        built-in voices carry their own."""

    def batch_key(self, request: SynthesisRequest) -> Hashable:
        """Segments whose requests share this key may run in one batch."""

    def synthesize(
        self, segments: list[Segment], on_chunk: ChunkSink | None = None
    ) -> list[np.ndarray]:
        """One float32 mono array at `sample_rate` per segment, in order. `on_chunk` receives
        each segment's audio as it is produced, in pieces that join into the returned array,
        the last with `final` set (from the engine thread)."""


class ContinuousEngine(Engine, Protocol):
    """An engine whose thread runs `serve`: segments join its running batch between two steps
    and leave it as they end, each with its own result."""

    def submit(
        self,
        segment: Segment,
        on_chunk: ChunkSink | None,
        on_done: Callable[[Segment, Any], None],
        clock: PlaybackClock | None = None,
    ) -> None:
        """Queue one segment (from any thread); `on_done` gets its SegmentResult. `clock`: a
        listener plays it as it comes (the engine keeps it ahead, and first)."""

    def cancel(self, segment: Segment) -> None:
        """Drop a submitted segment; its result comes back as cancelled."""

    def call(self, fn: Callable[[], Any]) -> Future[Any]:
        """Run `fn` in the engine thread between two steps of `serve` (from any thread)."""

    def serve(self, stop: threading.Event) -> None:
        """The engine thread's loop: admit submitted segments, step, until `stop` is set."""


def as_continuous(engine: Engine) -> ContinuousEngine | None:
    """The engine as a ContinuousEngine when it serves continuously as loaded, else None."""
    return cast(ContinuousEngine, engine) if engine.continuous else None
