"""The batch adapter: an engine that makes whole segments, served through the one boundary."""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Any

import numpy as np

from core.infra.settings import Settings
from core.queue.job import SynthesisRequest
from core.queue.voices import BUILTIN_VOICES, Voice
from workers.engines.base import (
    SAMPLE_RATE,
    Capabilities,
    ChunkSink,
    EngineError,
    Pieces,
    Segment,
    run_segments,
)
from workers.engines.batching import Batched
from workers.engines.espeak import create


class Counting:
    """A whole-segment engine: a segment's audio is as many samples as its text has characters;
    a text with "boom" in it fails its whole call; calls and their sizes are counted."""

    name, model_version, sample_rate, max_batch = "counting", "1", SAMPLE_RATE, 4
    capabilities = Capabilities()

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def load(self) -> None: ...

    def warmup(self) -> None: ...

    def stats(self) -> dict[str, Any]:
        return {}

    def voices(self) -> list[Voice]:
        return list(BUILTIN_VOICES)

    def pieces(self, text: str, request: SynthesisRequest, language: str | None = None) -> Pieces:
        return [(text, 0, len(text))]

    def batch_key(self, request: SynthesisRequest) -> Hashable:
        return request.voice

    def synthesize(
        self, segments: list[Segment], on_chunk: ChunkSink | None = None
    ) -> list[np.ndarray]:
        self.calls.append([s.text for s in segments])
        out = []
        for segment in segments:
            if "boom" in segment.text:
                raise EngineError(f"cannot say {segment.text!r}")
            audio = np.full(len(segment.text), 0.5, np.float32)
            if on_chunk is not None:
                on_chunk(segment, audio, True)
            out.append(audio)
        return out


def segment(text: str, voice: str = "en_male", job: str | None = None) -> Segment:
    return Segment(job or text, 0, text, SynthesisRequest(text=text, voice=voice))


def test_segments_that_share_a_key_are_made_in_one_call_in_order() -> None:
    engine = Counting()
    segments = [segment("aa"), segment("bbb", "zh_male"), segment("c"), segment("dddd")]
    audio = [r.audio.size for r in run_segments(Batched(engine), segments)]
    assert audio == [2, 3, 1, 4]
    assert engine.calls == [["aa", "c", "dddd"], ["bbb"]]  # the oldest's key first


def test_a_failed_call_fails_only_the_segment_that_fails() -> None:
    """Made again one at a time: the culprit fails alone; one that came out whole before the
    failure keeps its audio and its listener hears it once."""
    engine = Counting()
    adapter = Batched(engine)
    heard: list[tuple[str, int, bool]] = []
    results: dict[str, Any] = {}
    stop = threading.Event()

    def done(seg: Segment, result: Any) -> None:
        results[seg.text] = result
        if len(results) == 3:
            stop.set()

    for text in ("first", "boom", "third"):
        adapter.submit(segment(text), lambda s, a, f: heard.append((s.text, a.size, f)), done)
    adapter.serve(stop)
    assert results["boom"].error == "cannot say 'boom'" and not results["boom"].retryable
    assert results["first"].audio.size == 5 and results["third"].audio.size == 5
    assert engine.calls == [["first", "boom", "third"], ["boom"], ["third"]]
    assert heard == [("first", 5, True), ("third", 5, True)]


def test_a_cancelled_segment_is_never_made() -> None:
    engine = Counting()
    adapter = Batched(engine)
    results: dict[str, Any] = {}
    stop = threading.Event()
    gone, kept = segment("gone"), segment("kept")

    def done(seg: Segment, result: Any) -> None:
        results[seg.text] = result
        if len(results) == 2:
            stop.set()

    adapter.submit(gone, None, done)
    adapter.submit(kept, None, done)
    adapter.cancel(gone)
    adapter.serve(stop)
    assert results["gone"].error == "cancelled" and results["kept"].audio.size == 4
    assert engine.calls == [["kept"]]


def test_calls_run_between_batches_in_the_serving_thread() -> None:
    adapter = Batched(Counting())
    stop = threading.Event()
    future = adapter.call(lambda: threading.current_thread().name)
    future.add_done_callback(lambda _: stop.set())
    serving = threading.Thread(target=adapter.serve, args=(stop,), name="engine")
    serving.start()
    assert future.result(timeout=5) == "engine"
    serving.join(5)


def test_espeak_is_served_through_the_adapter() -> None:
    """(Not loaded here: eSpeak NG's C library is one per process, test_espeak.py's.)"""
    adapter = create(Settings())
    assert isinstance(adapter, Batched) and adapter.name == "espeak"
    assert adapter.capabilities.deterministic and not adapter.capabilities.registered_voices
