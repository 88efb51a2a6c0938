"""ChatTTS through its own `infer` (CHATTTS_RUNTIME=library, the benchmarks' "before"): whole
batches of segments that share a voice and parameters, served by `batching.Batched`."""

from __future__ import annotations

import logging
from collections.abc import Hashable
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from core.infra.settings import Settings
from core.queue.job import SynthesisRequest
from workers.engines.base import ChunkSink, EngineError, Segment
from workers.engines.chattts import CAPABILITIES
from workers.engines.chattts.library import infer as library
from workers.engines.chattts.library.params import speed_level
from workers.engines.chattts.library.sampling import Row
from workers.engines.chattts.loading import assembly
from workers.engines.chattts.model import ChatTTSModel
from workers.engines.chattts.rows import segment_seed

log = logging.getLogger(__name__)


class LibraryEngine(ChatTTSModel):
    """Counters for tests and stats besides the model's: `infer_calls` (completed `infer`
    calls), `last_batch_sizes` (rows of each `infer` made by the last `synthesize`),
    `last_token_lengths` (audio tokens per returned segment)."""

    # ChatTTS's infer hands each row over whole, when all end.
    capabilities = replace(CAPABILITIES, streaming="segments")
    runtime_name = "library"

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.infer_calls = 0
        self.last_batch_sizes: list[int] = []
        self.last_token_lengths: list[int] = []

    def _loaded(self, model: assembly.Model) -> None:
        self.whole_chat()  # the library runtime is ChatTTS's Chat

    def _warm(self, segment: Segment) -> None:
        self.synthesize([segment])

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), "infer_calls": self.infer_calls}

    def batch_key(self, request: SynthesisRequest) -> Hashable:
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

    def synthesize(
        self, segments: list[Segment], on_chunk: ChunkSink | None = None
    ) -> list[np.ndarray]:
        """Audio of each segment, one `infer` per voice and parameters (up to `max_batch` rows);
        `on_chunk` gets each row whole when its `infer` ends."""
        if self.model is None:
            raise EngineError("the chattts engine was not loaded", retryable=True)
        self.last_batch_sizes = []
        self.last_token_lengths = [0] * len(segments)
        groups: dict[Hashable, list[int]] = {}
        for i, segment in enumerate(segments):
            key = (self.batch_key(segment.request), segment.voice_data or "")
            groups.setdefault(key, []).append(i)
        out: list[np.ndarray] = [np.zeros(0, np.float32)] * len(segments)
        for indexes in groups.values():
            for start in range(0, len(indexes), self.max_batch):
                chosen = indexes[start : start + self.max_batch]
                group = [segments[i] for i in chosen]
                seeds = [segment_seed(s) for s in group]
                rows = self._infer_safe(group, seeds)
                for i, segment, row in zip(chosen, group, rows, strict=True):
                    out[i] = row.audio
                    self.last_token_lengths[i] = row.tokens
                    if row.truncated:
                        self.truncated(segment)
                    if on_chunk is not None:
                        on_chunk(segment, row.audio, True)
        return out

    def _infer_safe(self, segments: list[Segment], seeds: list[int]) -> list[Row]:
        """One `infer`, halving the batch (recursively) on a CUDA out-of-memory error."""
        try:
            return self._infer(segments, seeds)
        except torch.OutOfMemoryError as exc:
            message = str(exc).splitlines()[0] if str(exc) else "out of memory"
        # Retried outside the except block: its traceback holds the failed batch's tensors.
        self.oom_splits += 1
        self.release_memory(collect=True)
        if len(segments) == 1:
            raise EngineError(f"out of memory on a single segment: {message}", retryable=True)
        half = len(segments) // 2
        log.warning(
            "out of memory on a batch of %d segments (%s): retrying as %d + %d",
            *(len(segments), message, half, len(segments) - half),
        )
        return self._infer_safe(segments[:half], seeds[:half]) + self._infer_safe(
            segments[half:], seeds[half:]
        )

    def _infer(self, segments: list[Segment], seeds: list[int]) -> list[Row]:
        """One `Chat.infer` over the segments' texts; they share voice and parameters."""
        chat = self.whole_chat()
        voice = self._speakers.voice(segments[0])
        try:
            rows = library.infer_batch(
                chat, segments, seeds, voice, self.device, self.max_new_token
            )
        finally:
            self.release_memory()
        self.infer_calls += 1
        self.last_batch_sizes.append(len(segments))
        return rows
