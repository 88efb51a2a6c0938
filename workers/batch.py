"""Jobs in a worker's hands and how their segments are grouped into engine batches."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from core.audio import formats as audio
from core.queue.store import Started
from core.text.cues import align_words
from workers.engines import Engine, Segment


@dataclass
class ActiveJob:
    job_id: str
    entry: str
    started: Started
    segments: list[str]
    voice_data: str | None
    cache_digest: str | None = None
    audio: list[np.ndarray] = field(default_factory=list)
    cancel: bool = False
    lost: bool = False
    failure: str = ""  # why it stops, failed, at its next boundary (with `cancel` set)
    # A document's slice ended while another client's work waits: it goes back to the queue
    # and resumes after its stored parts (lua/progress.lua).
    yielding: bool = False
    completing: bool = False  # its result is being encoded and stored in the background
    store_failing_since: float = 0.0  # when the audio store first refused its file (monotonic)
    solo: bool = False  # a batch it was in failed: it runs alone from now on
    engine_s: float = 0.0  # its share of the engine time of the batches it was in
    served_s: float = 0.0  # the same on the hand's fair clock (intake.py sets where it starts)
    # Continuous batching: segments handed to the engine, and those back out of order.
    submitted: int = 0
    finished: dict[int, np.ndarray] = field(default_factory=dict)
    # Each segment's characters in the request's text (subtitle cues point into it).
    spans: list[tuple[int, int]] = field(default_factory=list)
    samples_done: int = 0  # samples of the job's audio so far, pauses included
    cues: list[dict[str, Any]] = field(default_factory=list)  # this attempt's, in order
    started_at: float = field(default_factory=time.time)  # this attempt's start (for the ETA)

    @property
    def document(self) -> bool:
        """Kept in parts (lua/progress.lua), resumed after its last stored segment."""
        return self.started.document

    def place(
        self, index: int, samples: int, rate: int, words: Sequence[tuple[int, int]] = ()
    ) -> tuple[dict[str, Any], int]:
        """Segment `index` (0-based, in order) of `samples` samples: its subtitle cue (its span
        of the job's audio in samples, and of the text in characters; its words' characters
        and samples where the engine gave them) and the samples it adds to the job's audio (the
        pause before it included)."""
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

    def next_segment(self, offset: int = 0) -> Segment | None:
        index = len(self.audio) + offset
        if index >= len(self.segments):
            return None
        return self.segment(index)

    def segment(self, index: int) -> Segment:
        return Segment(
            self.job_id, index, self.segments[index], self.started.request, self.voice_data
        )


def next_batch(in_hand: Mapping[str, ActiveJob], engine: Engine) -> list[tuple[ActiveJob, Segment]]:
    """Segments sharing the lead job's batch key: one per job first, then more per job. The lead
    is the least-served job on the hand's fair clock (the oldest on a tie), so that a short job
    taken while a long one runs goes after that one's next segment, not after all of it (the
    queue's fair order, kept in hand), and no job waits behind a stream of newcomers.

    Rows come back ordered by job (oldest first), then by segment index.
    """
    order = {job_id: i for i, job_id in enumerate(in_hand)}
    jobs = [j for j in in_hand.values() if not j.done]
    if not jobs:
        return []
    solo = next((j for j in jobs if j.solo), None)
    if solo is not None:
        mates = [solo]
    else:
        jobs.sort(key=lambda j: j.served_s)  # stable: the oldest first on a tie
        key = engine.batch_key(jobs[0].started.request)
        mates = [j for j in jobs if engine.batch_key(j.started.request) == key]
    batch: list[tuple[ActiveJob, Segment]] = []
    offset = 0
    while len(batch) < engine.max_batch:
        added = False
        for job in mates:
            segment = job.next_segment(offset)
            if segment is not None and len(batch) < engine.max_batch:
                batch.append((job, segment))
                added = True
        if not added:
            break
        offset += 1
    batch.sort(key=lambda pair: (order[pair[0].job_id], pair[1].index))
    return batch


def render(parts: list[np.ndarray], rate: int, fmt: str) -> tuple[bytes, float]:
    """A job's final file: its segments joined by short pauses, encoded (off the event loop)."""
    samples = audio.concatenate(parts, rate, audio.SEGMENT_GAP_S)
    return audio.encode(samples, rate, fmt), samples.size / rate
