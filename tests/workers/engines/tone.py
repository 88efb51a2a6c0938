"""A second model, written against the engine boundary alone (`workers.engines.base.Engine`): a
tone per word, made a word per step for every segment in flight, streamed as it goes. A worker
runs it with `CHATTTS_ENGINE=tests.workers.engines.tone`; nothing else in the tree names it."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from core.infra.settings import Settings
from core.queue.job import SynthesisRequest
from core.queue.voices import BUILTIN_VOICES, Voice
from core.text.sentences import locate, split_sentences
from workers.engines.base import (
    SAMPLE_RATE,
    Capabilities,
    ChunkSink,
    EngineCalls,
    EngineError,
    Pieces,
    PlaybackClock,
    Segment,
    SegmentDone,
    Spoken,
)

WORD_S = 0.12  # each word: a tone this long, then a tenth of it of silence
STEP_S = 0.002  # what a step costs: far faster than real time


def create(settings: Settings) -> ToneEngine:
    return ToneEngine(settings)


@dataclass
class _Row:
    segment: Segment
    on_chunk: ChunkSink | None
    on_done: SegmentDone
    words: list[str]
    made: list[np.ndarray] = field(default_factory=list)


class ToneEngine:
    name = "tone"
    model_version = "tone-1"
    sample_rate = SAMPLE_RATE
    max_batch = 4
    waiting_room = 4
    capabilities = Capabilities(
        knobs=frozenset({"speed"}),
        streaming="chunks",
        alignment=True,
        deterministic=True,
    )

    def __init__(self, settings: Settings) -> None:
        self.loaded = False
        self.steps = 0
        self._inbox: deque[_Row] = deque()
        self._rows: list[_Row] = []
        self._calls = EngineCalls(threading.Event())
        self._cancelled: set[tuple[str, int]] = set()
        self._lock = threading.Lock()

    def load(self) -> None:
        self.loaded = True

    def warmup(self) -> None:
        """Nothing to warm: a tone costs the same the first time."""

    def stats(self) -> dict[str, Any]:
        return {"tone_steps": self.steps}

    def voices(self) -> list[Voice]:
        return list(BUILTIN_VOICES)

    def pieces(self, text: str, request: SynthesisRequest, language: str | None = None) -> Pieces:
        sentences = split_sentences(text, 80)
        if not sentences:
            raise EngineError("the text holds nothing to speak")
        return [(s, a, b) for s, (a, b) in zip(sentences, locate(text, sentences), strict=True)]

    def submit(
        self,
        segment: Segment,
        on_chunk: ChunkSink | None,
        on_done: SegmentDone,
        clock: PlaybackClock | None = None,
    ) -> None:
        words = segment.text.split() or [segment.text]
        with self._lock:
            self._inbox.append(_Row(segment, on_chunk, on_done, words))

    def cancel(self, segment: Segment) -> None:
        with self._lock:
            self._cancelled.add((segment.job_id, segment.index))

    def call(self, fn: Callable[[], Any]) -> Future[Any]:
        return self._calls.call(fn)

    def serve(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self._between_steps()
            if self._rows:
                self._step()
            else:
                time.sleep(STEP_S)
        for row in [*self._rows, *self._inbox]:
            row.on_done(row.segment, Spoken.failed("cancelled"))
        self._rows, self._inbox = [], deque()
        self._between_steps()

    def _between_steps(self) -> None:
        self._calls.run()
        with self._lock:
            while self._inbox and len(self._rows) < self.max_batch:
                self._rows.append(self._inbox.popleft())
            cancelled, self._cancelled = self._cancelled, set()
        for row in [r for r in self._rows if (r.segment.job_id, r.segment.index) in cancelled]:
            self._rows.remove(row)
            row.on_done(row.segment, Spoken.failed("cancelled"))

    def _step(self) -> None:
        """One word more of every row in flight; rows whose words are all made leave."""
        time.sleep(STEP_S)
        self.steps += 1
        for row in list(self._rows):
            i = len(row.made)
            word = _tone(row.words[i], row.segment.request.speed)
            row.made.append(word)
            final = len(row.made) == len(row.words)
            if row.on_chunk is not None:
                row.on_chunk(row.segment, word, final)
            if final:
                self._rows.remove(row)
                self._place_words(row)
                row.on_done(row.segment, Spoken(np.concatenate(row.made)))

    @staticmethod
    def _place_words(row: _Row) -> None:
        at = sample = 0
        for word, audio in zip(row.words, row.made, strict=True):
            at = row.segment.text.find(word, at)
            row.segment.words.append((at, sample))
            sample += audio.size
            at += len(word)


def _tone(word: str, speed: float) -> np.ndarray:
    seconds = WORD_S / speed
    t = np.arange(int(SAMPLE_RATE * seconds), dtype=np.float32) / SAMPLE_RATE
    pitch = 200.0 + 20.0 * (sum(map(ord, word)) % 20)
    tone = 0.2 * np.sin(2 * np.pi * pitch * t, dtype=np.float32)
    return np.concatenate([tone, np.zeros(tone.size // 10, np.float32)]).astype(np.float32)
