"""The one boundary between the worker and a model (`Engine`): segments submitted one by one
while the engine's thread serves them, results handed back one by one; and what an engine says
it can do (`Capabilities`)."""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from core.audio.formats import SAMPLE_RATE as SAMPLE_RATE  # the engines and tests read it here
from core.queue.job import SynthesisRequest
from core.queue.voices import Voice

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
    attempt: int = 0  # 0, or which remake of the segment (workers/checks/): its own seed
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


@dataclass(frozen=True)
class Capabilities:
    """What an engine can do, published in its workers' heartbeats: the web tier and the page
    read these, never an engine's name."""

    # The format of the registered voices' data it speaks (core/voices/formats.py); None: only
    # its built-in names.
    voice_data: str | None = None
    # It mixes voices by weight (`a(2)+b(1)`: core/queue/voice_names.py).
    blends: bool = False
    # The request's fields it honours besides text, voice and format.
    knobs: frozenset[str] = frozenset({"speed"})
    # "chunks": a segment's audio goes out in pieces as it is made; "segments": whole.
    streaming: str = "segments"
    alignment: bool = False  # each word's time in the audio (subtitle cues by word)
    # The same text, voice and parameters always give the same samples: results of unseeded
    # requests may be cached too.
    deterministic: bool = False
    # The normalizer it reads text through, when text it would reduce to nothing can be
    # refused at submit ("chattts": Chinese and English letters, numbers spelled out).
    normalizer: str | None = None
    # Its weights make speech. False for stand-ins (random-weight checkpoints) whose noise no
    # check passes: their segments are checked and told, never made again (workers/checks/).
    speech: bool = True

    @property
    def registered_voices(self) -> bool:
        return self.voice_data is not None

    def public(self) -> dict[str, Any]:
        return {
            "registered_voices": self.registered_voices,
            "voice_data": self.voice_data,
            "blends": self.blends,
            "knobs": sorted(self.knobs),
            "streaming": self.streaming,
            "alignment": self.alignment,
            "deterministic": self.deterministic,
            "normalizer": self.normalizer,
            "speech": self.speech,
        }


class SegmentResult(Protocol):
    """What an engine hands back for one segment."""

    audio: np.ndarray
    truncated: bool  # it hit the engine's budget: its audio is cut (docs/engines.md)
    error: str | None  # "cancelled", or why the segment failed

    @property
    def retryable(self) -> bool:
        """Another attempt could succeed (an out-of-memory error, say)."""


@dataclass
class Spoken:
    """A SegmentResult for engines without their own."""

    audio: np.ndarray
    truncated: bool = False
    error: str | None = None
    retryable: bool = False

    @classmethod
    def failed(cls, error: str, retryable: bool = False) -> Spoken:
        return cls(np.zeros(0, np.float32), False, error, retryable)


SegmentDone = Callable[[Segment, Any], None]  # (segment, its SegmentResult), once per segment


class Engine(Protocol):
    """One model on one device, served continuously: segments are submitted one by one (from
    any thread) while the engine thread runs `serve`, and each comes back with its own result.
    `load`, `warmup`, `voices`, `pieces` and `stats` run in the engine thread too (through
    `call` while it serves): engines are not thread-safe. Engines that make whole segments
    are served through this by `batching.Batched`."""

    @property
    def name(self) -> str: ...

    @property
    def model_version(self) -> str: ...

    @property
    def sample_rate(self) -> int: ...

    @property
    def max_batch(self) -> int:
        """Segments it makes at once."""

    @property
    def waiting_room(self) -> int:
        """Segments it keeps submitted beyond those it makes: a continuously batching engine
        fills a free row from them at once; one that makes whole batches keeps none, so that
        each batch is chosen (the least-served job first) only when it starts."""

    @property
    def capabilities(self) -> Capabilities: ...

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

    def submit(
        self,
        segment: Segment,
        on_chunk: ChunkSink | None,
        on_done: SegmentDone,
        clock: PlaybackClock | None = None,
    ) -> None:
        """Queue one segment (from any thread); `on_done` gets its SegmentResult, `on_chunk` its
        audio as it is made. `clock`: a listener plays it as it comes (an engine that can keeps
        it ahead, and first)."""

    def cancel(self, segment: Segment) -> None:
        """Drop a submitted segment; its result comes back as cancelled."""

    def call(self, fn: Callable[[], Any]) -> Future[Any]:
        """Run `fn` in the engine thread between two steps of `serve` (from any thread)."""

    def serve(self, stop: threading.Event) -> None:
        """The engine thread's loop: take submitted segments and make them, until `stop`."""


class EngineCalls:
    """Functions handed to an engine's thread from others (`Engine.call`), run there between two
    steps of its serving loop: while the loop runs, it is the only thread that touches the model.
    `wakeup` is set when one arrives, so that an idle loop runs it at once."""

    def __init__(self, wakeup: threading.Event) -> None:
        self._calls: deque[tuple[Callable[[], Any], Future[Any]]] = deque()
        self._lock = threading.Lock()
        self._wakeup = wakeup

    def call(self, fn: Callable[[], Any]) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            self._calls.append((fn, future))
        self._wakeup.set()
        return future

    def run(self) -> None:
        """Run the calls waiting (in the engine thread)."""
        while True:
            with self._lock:
                if not self._calls:
                    return
                fn, future = self._calls.popleft()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except BaseException as exc:  # handed to the caller, whatever it is
                future.set_exception(exc)


def run_segments(
    engine: Engine, segments: Sequence[Segment], on_chunk: ChunkSink | None = None
) -> list[Any]:
    """Make `segments` to the end in this thread (which must be free to be the engine's): their
    SegmentResults, in order. For warm-ups, benchmarks and tests; the worker serves instead.
    Raises EngineError for the first segment that failed."""
    results: dict[int, Any] = {}
    stop = threading.Event()

    def done(segment: Segment, result: Any) -> None:
        results[index[id(segment)]] = result
        if len(results) == len(segments):
            stop.set()

    index = {id(segment): i for i, segment in enumerate(segments)}
    for segment in segments:
        engine.submit(segment, on_chunk, done)
    if segments:
        engine.serve(stop)
    ordered = [results[i] for i in range(len(segments))]
    for result in ordered:
        if result.error is not None:
            raise EngineError(result.error, retryable=result.retryable)
    return ordered


def synthesize(engine: Engine, segments: Sequence[Segment]) -> list[np.ndarray]:
    """The audio of `segments`, made to the end in this thread (see `run_segments`)."""
    return [result.audio for result in run_segments(engine, segments)]
