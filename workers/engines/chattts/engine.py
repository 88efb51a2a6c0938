"""The ChatTTS engine: its weights loaded once per worker, segments decoded by our runtime
(continuous batching, chunked streaming; `runtime/`, fed by `rows.py`), or by ChatTTS's own
`infer` for refinement and `CHATTTS_RUNTIME=library` (`library/`). Voices resolve through
`voices/speakers.py`; loading is `loading/`.

Imported only when the engine is created (it imports torch); see `__init__.py` for the light API.
"""

from __future__ import annotations

import os

# Set before torch initialises CUDA: expandable segments keep the variable-length batches of a
# TTS server from fragmenting the caching allocator. An operator's own setting wins.
if "PYTORCH_CUDA_ALLOC_CONF" not in os.environ and "PYTORCH_ALLOC_CONF" not in os.environ:
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"

import gc
import logging
import secrets
import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from dataclasses import replace
from importlib.metadata import version
from typing import Any

import numpy as np
import torch

from core.infra.logs import job_log
from core.infra.settings import Settings
from core.queue.job import SynthesisRequest
from core.queue.voices import BUILTIN_VOICES, Voice
from workers.engines.base import SAMPLE_RATE, ChunkSink, EngineError, Pieces, Segment
from workers.engines.chattts import segments as text_segments
from workers.engines.chattts.faults import FAULT_OOM_ENV, InjectedOom
from workers.engines.chattts.library import infer as library
from workers.engines.chattts.library.params import speed_level
from workers.engines.chattts.library.sampling import MAX_NEW_TOKEN, Row
from workers.engines.chattts.loading import assembly, imports, loader
from workers.engines.chattts.rows import RowDone, RuntimeRows, row_seed
from workers.engines.chattts.runtime.admission import Clock
from workers.engines.chattts.runtime.runtime import Runtime, RuntimeConfig
from workers.engines.chattts.voices.speakers import Speakers

log = logging.getLogger(__name__)

# The warm-up is one row of a few tokens: enough to run every module once (the normalizer's
# compiled code, the tokenizer, a prefill, steps, the vocoder), whose first calls cost what later
# ones do not. On a CPU that is all it buys: two rows of 16 tokens took 3.6 s more at start-up and
# left the first job no faster than this one does (one process, the development CPU).
WARMUP_MAX_NEW_TOKEN = 4


class ChatTTSEngine:
    """ChatTTS on one device. All methods run in the worker's single engine thread.

    Counters for tests and stats: `infer_calls` (completed `infer` calls), `last_batch_sizes`
    (rows of each `infer` made by the last `synthesize`), `last_token_lengths` (audio tokens per
    returned segment), `last_warnings` (truncations of the last `synthesize`), `oom_splits`,
    `truncations`, `load_seconds`.
    """

    name = "chattts"
    sample_rate = SAMPLE_RATE
    deterministic = False  # unseeded rows draw fresh randomness: no result cached for them
    registered_voices = True

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.max_batch = max(1, settings.max_batch)
        self.max_new_token = MAX_NEW_TOKEN
        self.retry_truncated = True  # a truncated segment is re-synthesized once, in halves
        self.model_version = f"ChatTTS {version('ChatTTS')}"
        self.model: assembly.Model | None = None
        self._chat: Any = None  # ChatTTS's Chat (chat.BatchChat), built on first use
        self.device = torch.device("cpu")
        self.infer_calls = 0
        self.oom_splits = 0
        self.truncations = 0
        self.load_seconds: float | None = None
        self.last_batch_sizes: list[int] = []
        self.last_token_lengths: list[int] = []
        self.last_warnings: list[str] = []
        self._speakers = Speakers()
        self._oom = InjectedOom()
        self.runtime: Runtime | None = None  # None: ChatTTS's own `infer` (CHATTTS_RUNTIME=library)
        self.rows: RuntimeRows | None = None
        self._chunk_sink: ChunkSink | None = None

    # --- lifecycle ------------------------------------------------------------------------------

    def load(self) -> None:
        started = time.perf_counter()
        checkpoint = loader.locate(self.settings.model_dir)
        device = loader.resolve_device(self.settings.device)
        imports.partial()  # before anything imports ChatTTS: only what start-up uses
        library.quiet_libraries()
        library.cache_compiled_normalizer()
        if self.settings.compile and device.type != "cuda":
            log.info("CHATTTS_COMPILE is used on CUDA only; running %s uncompiled", device)
        model = loader.load_model(checkpoint, device, library.library_logger())
        self._speakers = Speakers(model, library.builtin_voices(model.config))
        self.model, self.device = model, device
        if checkpoint.sha256 is not None:
            self.model_version += f" ({checkpoint.description})"
        if checkpoint.max_new_token:
            self.max_new_token = checkpoint.max_new_token
        self.runtime = self._runtime(model)
        if self.runtime is None:
            self.whole_chat()  # the library runtime is ChatTTS's Chat
        else:
            self.rows = RuntimeRows(model, self._speakers, self.runtime, device, self.whole_chat)
        if os.environ.get(FAULT_OOM_ENV):
            self.inject_oom(int(os.environ[FAULT_OOM_ENV]))
        self.load_seconds = time.perf_counter() - started
        log.info(
            "ChatTTS loaded from %s on %s in %.1f s", checkpoint.root, device, self.load_seconds
        )

    @property
    def chat(self) -> Any:
        """ChatTTS's Chat over the loaded modules (built now if it was not); None before load."""
        return self.whole_chat() if self.model is not None else None

    def whole_chat(self) -> Any:
        """ChatTTS's Chat, for refinement and the library runtime: built
        the first time one needs it (importing the rest of ChatTTS: 1-5 s, once per process),
        around the modules already loaded."""
        if self._chat is None:
            if self.model is None:
                raise EngineError("the chattts engine was not loaded", retryable=True)
            started = time.perf_counter()
            chat = assembly.chat_around(self.model, self.settings.compile, library.library_logger())
            self._chat = chat
            self._oom.hook(chat)
            log.info("ChatTTS's Chat built in %.1f s", time.perf_counter() - started)
        return self._chat

    def _runtime(self, model: assembly.Model) -> Runtime | None:
        s = self.settings
        if s.runtime == "library":
            return None
        if s.runtime != "ours":
            raise EngineError(f"unknown CHATTTS_RUNTIME {s.runtime!r}: use ours or library")
        config = RuntimeConfig(
            slots=self.max_batch,
            context=s.context,
            stream_tokens=s.stream_tokens,
            first_chunk_tokens=s.first_chunk_tokens,
            lookahead_tokens=s.lookahead_tokens,
            dtype=s.dtype,
            headroom=s.stream_headroom if s.stream_admission == "capacity" else 0.0,
            stream_rows=s.stream_capacity,
        )
        try:
            return Runtime(model, self.max_new_token, config)
        except ValueError as exc:
            raise EngineError(f"cannot build the decode runtime: {exc}") from exc

    def warmup(self) -> None:
        saved, self.max_new_token = self.max_new_token, WARMUP_MAX_NEW_TOKEN
        try:
            request = SynthesisRequest(text="你好", voice="zh_female", seed=0)
            segment = Segment("warmup", 0, request.text, request)
            self._infer([segment], [row_seed(segment, 0, 0)])
        finally:
            self.max_new_token = saved
        if self.runtime is not None:  # its one round ran cold code: no measure of capacity
            self.runtime.scheduler.step_times.forget()

    def inject_oom(self, above_batch: int | None) -> None:
        """Fault injection: make the GPT raise torch.OutOfMemoryError on batches above a size."""
        self._oom.set(above_batch, self.runtime, self._chat)

    def stats(self) -> dict[str, Any]:
        """Counters for the worker's heartbeat and metrics."""
        return {
            "device": str(self.device),
            "infer_calls": self.infer_calls,
            "oom_splits": self.oom_splits,
            "truncations": self.truncations,
            "load_seconds": self.load_seconds,
            "max_new_token": self.max_new_token,
            "runtime": "ours" if self.runtime is not None else "library",
            **(self.runtime.stats() if self.runtime is not None else {}),
        }

    def voices(self) -> list[Voice]:
        return list(BUILTIN_VOICES)

    # --- text -----------------------------------------------------------------------------------

    def pieces(self, text: str, request: SynthesisRequest, language: str | None = None) -> Pieces:
        return text_segments.pieces(text, request, language)

    def batch_key(self, request: SynthesisRequest) -> Hashable:
        if self.runtime is not None:
            return "any"  # every row carries its own voice, prompt and sampling parameters
        # Seeds differ freely within a batch (each row has its own generator); ChatTTS takes
        # one voice, one prompt and one set of sampling parameters per `infer`.
        return (
            request.voice,
            speed_level(request.speed),
            request.temperature,
            request.top_p,
            request.top_k,
            request.refine,
            request.prompt if request.refine else None,
        )

    # --- synthesis ------------------------------------------------------------------------------

    def synthesize(
        self, segments: list[Segment], on_chunk: ChunkSink | None = None
    ) -> list[np.ndarray]:
        """Audio of each segment; `on_chunk` gets it as it is decoded (the runtime: every
        CHATTTS_STREAM_TOKENS tokens; the library path: whole segments at the batch's end).
        A streamed segment that hits its budget is not retried shorter: its start is out."""
        if self.model is None:
            raise EngineError("the chattts engine was not loaded", retryable=True)
        self._chunk_sink = on_chunk
        try:
            return self._synthesize(segments)
        finally:
            self._chunk_sink = None

    def _synthesize(self, segments: list[Segment]) -> list[np.ndarray]:
        self.last_batch_sizes, self.last_warnings = [], []
        self.last_token_lengths = [0] * len(segments)
        groups: dict[Hashable, list[int]] = {}
        for i, segment in enumerate(segments):
            voice_key = "" if self.runtime is not None else segment.voice_data or ""
            key = (self.batch_key(segment.request), voice_key)
            groups.setdefault(key, []).append(i)
        out: list[np.ndarray] = [np.zeros(0, np.float32)] * len(segments)
        for indexes in groups.values():
            group = [segments[i] for i in indexes]
            for start in range(0, len(group), self.max_batch):
                rows = self._synthesize_rows(group[start : start + self.max_batch])
                for i, row in zip(indexes[start : start + self.max_batch], rows, strict=True):
                    out[i] = row.audio
                    self.last_token_lengths[i] = row.tokens
        return out

    def _synthesize_rows(self, segments: list[Segment]) -> list[Row]:
        bases = [
            s.request.seed if s.request.seed is not None else secrets.randbits(62) for s in segments
        ]
        rows = self._infer_safe(
            segments, [row_seed(s, 0, b) for s, b in zip(segments, bases, strict=True)]
        )
        retry: list[tuple[int, list[str]]] = []
        for i, row in enumerate(rows):
            if not row.truncated:
                continue
            # A streamed segment's start is out already: it keeps its (cut) audio.
            again = self.retry_truncated and self._chunk_sink is None
            pieces = text_segments.halves(segments[i].text) if again else []
            if len(pieces) > 1:
                retry.append((i, pieces))
            else:
                self._warn(
                    segments[i],
                    "hit max_new_token: its audio is cut"
                    + (" (too short to split)" if again else ""),
                )
        if not retry:
            return rows
        parts = [replace(segments[i], text=p) for i, pieces in retry for p in pieces]
        seeds = [
            row_seed(segments[i], k + 1, bases[i])
            for i, pieces in retry
            for k in range(len(pieces))
        ]
        part_rows: list[Row] = []
        for start in range(0, len(parts), self.max_batch):
            end = start + self.max_batch
            part_rows += self._infer_safe(parts[start:end], seeds[start:end])
        position = 0
        for i, pieces in retry:
            done = part_rows[position : position + len(pieces)]
            position += len(pieces)
            still = any(r.truncated for r in done)
            rows[i] = Row(
                np.concatenate([r.audio for r in done]), sum(r.tokens for r in done), still
            )
            self._warn(
                segments[i],
                f"hit max_new_token; retried as {len(pieces)} shorter parts"
                + (", still cut" if still else ""),
            )
        return rows

    def _warn(self, segment: Segment, message: str) -> None:
        text = f"job {segment.job_id} segment {segment.index} {message}"
        self.truncations += 1
        self.last_warnings.append(text)
        log.warning("%s", text, extra=job_log(segment.job_id))

    def _infer_safe(self, segments: list[Segment], seeds: list[int]) -> list[Row]:
        """`_infer`, halving the batch (recursively) on a CUDA out-of-memory error."""
        try:
            return self._infer(segments, seeds)
        except torch.OutOfMemoryError as exc:
            message = str(exc).splitlines()[0] if str(exc) else "out of memory"
        # Retried outside the except block: its traceback holds the failed batch's tensors.
        self.oom_splits += 1
        self._release_memory(collect=True)
        if len(segments) == 1:
            raise EngineError(f"out of memory on a single segment: {message}", retryable=True)
        half = len(segments) // 2
        log.warning(
            "out of memory on a batch of %d segments (%s): retrying as %d + %d",
            len(segments),
            message,
            half,
            len(segments) - half,
        )
        return self._infer_safe(segments[:half], seeds[:half]) + self._infer_safe(
            segments[half:], seeds[half:]
        )

    def _infer(self, segments: list[Segment], seeds: list[int]) -> list[Row]:
        if self.runtime is None:
            return self._infer_library(segments, seeds)
        if self.rows is None:
            raise EngineError("the chattts engine was not loaded", retryable=True)
        rows = self.rows.run(segments, seeds, self.max_new_token, self._chunk_sink)
        self.infer_calls += 1
        self.last_batch_sizes.append(len(segments))
        return rows

    def _infer_library(self, segments: list[Segment], seeds: list[int]) -> list[Row]:
        """One `Chat.infer` over the segments' texts; they share voice and parameters."""
        chat = self.whole_chat()
        voice = self._speakers.voice(segments[0])
        try:
            rows = library.infer_batch(
                chat, segments, seeds, voice, self.device, self.max_new_token
            )
        finally:
            self._release_memory()
        self.infer_calls += 1
        self.last_batch_sizes.append(len(segments))
        if self._chunk_sink is not None:  # ChatTTS's infer: each row whole, when all end
            for segment, row in zip(segments, rows, strict=True):
                self._chunk_sink(segment, row.audio, True)
        return rows

    def _release_memory(self, collect: bool = False) -> None:
        if collect:
            gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    # --- continuous batching (our runtime) ------------------------------------------------------

    @property
    def continuous(self) -> bool:
        """Segments join the running batch between steps (`submit` while `serve` runs)."""
        return self.rows is not None

    def submit(
        self,
        segment: Segment,
        on_chunk: ChunkSink | None,
        on_done: RowDone,
        clock: Clock | None = None,
    ) -> None:
        """Queue one segment for `serve` (from any thread); `on_done` gets its result."""
        if self.rows is None:
            raise EngineError("continuous batching needs CHATTTS_RUNTIME=ours", retryable=False)
        base = segment.request.seed
        seed = row_seed(segment, 0, base if base is not None else secrets.randbits(62))
        self.rows.submit(segment, seed, self.max_new_token, on_chunk, on_done, clock)

    def cancel(self, segment: Segment) -> None:
        if self.rows is not None:
            self.rows.cancel(segment)

    def call(self, fn: Callable[[], Any]) -> Future[Any]:
        """Run `fn` in the engine thread between two steps of `serve` (from any thread)."""
        if self.rows is None:
            raise EngineError("continuous batching needs CHATTTS_RUNTIME=ours", retryable=False)
        return self.rows.call(fn)

    def serve(self, stop: threading.Event) -> None:
        """The engine thread's loop: admit submitted segments, step, until `stop` is set."""
        if self.rows is not None:
            self.rows.serve(stop)

    # --- voices ---------------------------------------------------------------------------------

    def voice_from_recording(self, audio: np.ndarray, sample_rate: int, transcript: str) -> str:
        """Voice data (a ChatTTS sample prompt with its transcript) from a reference recording."""
        return self._speakers.from_recording(audio, sample_rate, transcript)
