"""Jobs in a worker's hand: what each holds (its segments, its audio so far, its cues) and the
one state it is in (`Hold`)."""

from __future__ import annotations

import enum
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from core.audio import formats as audio
from core.audio.isolated import CodecProcess
from core.queue.job import SynthesisRequest
from core.queue.results import Started
from core.text.cues import align_words
from workers.checks.verdict import Verdict
from workers.engines import Segment


class Hold(enum.Enum):
    """What happens next to a job in hand. While its result is stored it stays as it is (the
    completion is fenced: a job lost meanwhile is refused there)."""

    RUNNING = "running"  # its segments are being made
    # A document's slice ended while another client's work waits: it goes back to the queue
    # once its rows are out, and resumes after its stored parts (lua/progress.lua).
    YIELDING = "yielding"
    # Cancelled by its client, or failing (`failure` says why): it stops at its next boundary.
    STOPPING = "stopping"
    LOST = "lost"  # another worker holds it now: dropped, nothing written


@dataclass
class ActiveJob:
    job_id: str
    entry: str
    started: Started
    segments: list[str]
    voice_data: str | None
    cache_digest: str | None = None
    audio: list[np.ndarray] = field(default_factory=list)
    hold: Hold = Hold.RUNNING
    failure: str = ""  # why it stops, failed, at its next boundary (Hold.STOPPING)
    store_failing_since: float = 0.0  # when the audio store first refused its file (monotonic)
    # Its last run never ended cleanly (it may crash its worker): it has the engine to itself.
    alone: bool = False
    engine_s: float = 0.0  # its share of the engine's time while its segments were in it
    served_s: float = 0.0  # the same on the hand's fair clock (intake.py sets where it starts)
    # Segments handed to the engine, and those back (checked) out of order, with their verdicts.
    submitted: int = 0
    finished: dict[int, tuple[Segment, np.ndarray, Verdict | None]] = field(default_factory=dict)
    tries: dict[int, Tries] = field(default_factory=dict)  # attempts of segments being made
    # Each segment's characters in the request's text (subtitle cues point into it).
    spans: list[tuple[int, int]] = field(default_factory=list)
    # Each segment's request: the job's, with a voice per language's voice for its sentences.
    requests: list[SynthesisRequest] = field(default_factory=list)
    samples_done: int = 0  # samples of the job's audio so far, pauses included
    cues: list[dict[str, Any]] = field(default_factory=list)  # this attempt's, in order
    started_at: float = field(default_factory=time.time)  # this attempt's start (for the ETA)

    def stop(self, failure: str = "") -> None:
        """Cancelled (or failing, with why): it stops at its next boundary."""
        if self.hold in (Hold.RUNNING, Hold.YIELDING):
            self.hold, self.failure = Hold.STOPPING, failure

    def lose(self) -> None:
        """Another worker holds it now."""
        self.hold = Hold.LOST

    def hand_back(self) -> None:
        """Its document's slice ended: it goes back to the queue once its rows are out."""
        if self.hold is Hold.RUNNING:
            self.hold = Hold.YIELDING

    @property
    def dropped(self) -> bool:
        """Cancelled, failing or lost: none of its segments are made any more."""
        return self.hold in (Hold.STOPPING, Hold.LOST)

    @property
    def document(self) -> bool:
        """Kept in parts (lua/progress.lua), resumed after its last stored segment."""
        return self.started.document

    def place(
        self,
        index: int,
        samples: int,
        rate: int,
        words: Sequence[tuple[int, int]] = (),
        check: dict[str, Any] | None = None,
    ) -> tuple[dict[str, Any], int]:
        """Segment `index` (0-based, in order) of `samples` samples: its subtitle cue (its span
        of the job's audio in samples, and of the text in characters; its words' characters
        and samples where the engine gave them; its verdict, `check`) and the samples it adds
        to the job's audio (the pause before it included)."""
        gap = int(rate * audio.SEGMENT_GAP_S) if index > 0 else 0
        start = self.samples_done + gap
        span = self.spans[index] if index < len(self.spans) else (0, 0)
        cue: dict[str, Any] = {"i": index + 1, "start": start, "end": start + samples}
        cue["from"], cue["to"] = span
        if words and index < len(self.segments):
            text = self.started.request.text
            placed = align_words(self.segments[index], text, span, words)
            if placed:
                cue["words"] = [[at, start + sample] for at, sample in placed]
        if check is not None:
            cue["check"] = check
        self.samples_done = start + samples
        self.cues.append(cue)
        return cue, gap + samples

    def eta(self) -> float | None:
        """When the job should end, from this attempt's pace (None before its first segment)."""
        done_now = len(self.audio) - self.started.segments_done
        if done_now <= 0:
            return None
        pace = (time.time() - self.started_at) / done_now
        return time.time() + pace * (len(self.segments) - len(self.audio))

    @property
    def done(self) -> bool:
        return len(self.audio) >= len(self.segments)

    def segment(self, index: int) -> Segment:
        request = self.requests[index] if index < len(self.requests) else self.started.request
        return Segment(self.job_id, index, self.segments[index], request, self.voice_data)


@dataclass
class Tries:
    """The attempts of one segment: made, heard, and the best so far (its segment as the engine
    made it, its audio, its verdict)."""

    made: int = 0
    heard: int = 0
    best: tuple[Segment, np.ndarray, Verdict] | None = None

    def heard_one(self, segment: Segment, samples: np.ndarray, verdict: Verdict) -> None:
        self.heard += 1
        if self.best is None or verdict.rank() < self.best[2].rank():
            self.best = (segment, samples, verdict)


def render(
    parts: list[np.ndarray], rate: int, fmt: str, encoder: CodecProcess
) -> tuple[bytes, float]:
    """A job's final file: its segments joined by short pauses, encoded (off the event loop;
    by `encoder`'s child where the format's encoder is native code)."""
    samples = audio.concatenate(parts, rate, audio.SEGMENT_GAP_S)
    return encoder.encode(samples, rate, fmt), samples.size / rate
