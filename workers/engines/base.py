"""What every engine provides: load, warm up, list voices, synthesize a batch of segments."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from core.audio.formats import SAMPLE_RATE
from core.queue.job import SynthesisRequest
from core.queue.voices import Voice

__all__ = ["SAMPLE_RATE", "ChunkSink", "Engine", "EngineError", "Segment", "SegmentResult"]


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


# (segment, audio piece, final): a piece of a segment's audio as soon as the engine has it.
ChunkSink = Callable[["Segment", np.ndarray, bool], None]


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
