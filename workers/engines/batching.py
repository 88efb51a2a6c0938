"""Engines that make whole segments a batch at a time (`SegmentEngine`: eSpeak NG, ChatTTS's own
`infer`), served through the one continuous protocol by `Batched`."""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from core.queue.job import SynthesisRequest
from core.queue.voices import Voice
from workers.engines.base import (
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

log = logging.getLogger(__name__)
# How long the serving loop sleeps with nothing to do before it looks again (a submission or a
# call wakes it at once).
IDLE_WAIT_S = 0.05


class SegmentEngine(Protocol):
    """An engine that makes a batch of whole segments per call. All methods run in one thread."""

    name: str
    model_version: str
    sample_rate: int
    max_batch: int
    capabilities: Capabilities

    def stats(self) -> dict[str, Any]: ...

    def load(self) -> None: ...

    def warmup(self) -> None: ...

    def voices(self) -> list[Voice]: ...

    def pieces(
        self, text: str, request: SynthesisRequest, language: str | None = None
    ) -> Pieces: ...

    def batch_key(self, request: SynthesisRequest) -> Hashable:
        """Segments whose requests share this key may run in one call."""

    def synthesize(
        self, segments: list[Segment], on_chunk: ChunkSink | None = None
    ) -> list[np.ndarray]:
        """One float32 mono array at `sample_rate` per segment, in order. `on_chunk` receives
        each segment's audio as it is produced, in pieces that join into the returned array,
        the last with `final` set. A segment that hits the engine's budget comes back cut (the
        engine logs and counts it)."""


@dataclass
class _Submitted:
    segment: Segment
    on_chunk: ChunkSink | None
    on_done: SegmentDone
    out: int = 0  # samples its listener has had, over every attempt


class Batched:
    """A SegmentEngine as an Engine. Its serving loop takes the oldest submitted segment and
    those after it that share its batch key (up to `max_batch`), makes them in one call and
    hands each result back. A call that fails with several segments is made again one segment
    at a time, so that the segment that fails fails alone and its batch-mates lose nothing."""

    def __init__(self, engine: SegmentEngine) -> None:
        self.engine = engine
        self._inbox: deque[_Submitted] = deque()
        self._cancelled: set[tuple[str, int]] = set()
        self._lock = threading.Lock()
        self._wakeup = threading.Event()
        self._calls = EngineCalls(self._wakeup)

    # -- what the engine is: the wrapped engine's own (its name, rates, voices, pieces, extras
    # such as voice_from_recording), forwarded; it keeps no segments waiting beyond a batch.

    waiting_room = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)

    # -- the continuous protocol ------------------------------------------------------------

    def submit(
        self,
        segment: Segment,
        on_chunk: ChunkSink | None,
        on_done: SegmentDone,
        clock: PlaybackClock | None = None,
    ) -> None:
        with self._lock:
            self._inbox.append(_Submitted(segment, on_chunk, on_done))
        self._wakeup.set()

    def cancel(self, segment: Segment) -> None:
        with self._lock:
            self._cancelled.add((segment.job_id, segment.index))

    def call(self, fn: Callable[[], Any]) -> Future[Any]:
        return self._calls.call(fn)

    def serve(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self._calls.run()
            batch = self._take()
            if batch:
                self._make(batch)
            else:
                self._wakeup.wait(IDLE_WAIT_S)
                self._wakeup.clear()
        with self._lock:
            waiting = list(self._inbox)
            self._inbox.clear()
        for item in waiting:
            item.on_done(item.segment, Spoken.failed("cancelled"))
        self._calls.run()

    def _take(self) -> list[_Submitted]:
        """The next call's segments (cancelled ones answered as such)."""
        with self._lock:
            dropped = [
                i for i in self._inbox if (i.segment.job_id, i.segment.index) in self._cancelled
            ]
            for item in dropped:
                self._inbox.remove(item)
            self._cancelled.clear()
            batch: list[_Submitted] = []
            if self._inbox:
                key = self.engine.batch_key(self._inbox[0].segment.request)
                for item in list(self._inbox):
                    if len(batch) >= max(1, self.engine.max_batch):
                        break
                    if self.engine.batch_key(item.segment.request) == key:
                        batch.append(item)
                        self._inbox.remove(item)
        for item in dropped:
            item.on_done(item.segment, Spoken.failed("cancelled"))
        return batch

    def _make(self, batch: list[_Submitted]) -> None:
        items = {id(item.segment): item for item in batch}
        # What each segment made in this call: a failed call's segments that came out whole
        # are not made again; one made again sends its listener only what it did not have.
        pieces: dict[int, list[np.ndarray]] = {}
        sizes: dict[int, int] = {}  # samples made so far, by segment
        whole: set[int] = set()

        def to_sinks(segment: Segment, samples: np.ndarray, final: bool) -> None:
            start = sizes.get(id(segment), 0)
            sizes[id(segment)] = start + samples.size
            pieces.setdefault(id(segment), []).append(samples)
            if final:
                whole.add(id(segment))
            item = items[id(segment)]
            if item.on_chunk is not None:
                new = samples[max(0, item.out - start) :]
                item.out = max(item.out, start + samples.size)
                if new.size or final:
                    item.on_chunk(segment, new, final)

        try:
            arrays = self.engine.synthesize([item.segment for item in batch], to_sinks)
        except Exception as exc:
            self._failed(batch, exc, {k: np.concatenate(pieces[k]) for k in whole})
            return
        for item, samples in zip(batch, arrays, strict=True):
            item.on_done(item.segment, Spoken(samples))

    def _failed(self, batch: list[_Submitted], exc: Exception, made: dict[int, np.ndarray]) -> None:
        """A call failed: one segment fails; several are made again one at a time (those that
        came out whole before the failure keep their audio)."""
        if len(batch) > 1:
            log.warning(
                "%s: a call of %d segments failed (%s); making each alone",
                *(self.engine.name, len(batch), exc),
            )
            for item in batch:
                samples = made.get(id(item.segment))
                if samples is not None:
                    item.on_done(item.segment, Spoken(samples))
                else:
                    self._make([item])
            return
        [item] = batch
        if not isinstance(exc, EngineError):
            log.exception("%s: synthesis raised", self.engine.name, exc_info=exc)
            exc = EngineError(f"{type(exc).__name__}: {exc}")
        item.on_done(item.segment, Spoken.failed(str(exc), exc.retryable))
