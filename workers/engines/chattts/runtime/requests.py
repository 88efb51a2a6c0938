"""What the runtime's scheduler takes and gives: a row to speak (its prompt, sampling and
callbacks), its result, and the scheduler's counters."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from workers.engines.chattts.runtime.admission import Clock
from workers.engines.chattts.runtime.vocoder import Cursor


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.3
    top_p: float = 0.7
    top_k: int = 20
    repetition_penalty: float = 1.05
    seed: int = 0
    max_new_token: int = 2048


@dataclass
class RowResult:
    audio: np.ndarray
    tokens: int
    truncated: bool
    error: str | None = None
    codes: np.ndarray | None = None  # [tokens, num_vq]: the audio codes drawn

    @property
    def retryable(self) -> bool:
        """Another attempt could succeed: the device ran out of memory."""
        return (self.error or "").startswith("out of memory")

    @classmethod
    def failed(cls, error: str, tokens: int = 0) -> RowResult:
        """A row that ended without audio, and why ("cancelled", or what went wrong)."""
        return cls(np.zeros(0, np.float32), tokens, False, error)


@dataclass(eq=False)
class RowRequest:
    """One segment to speak, known by `key` (the caller's: its callbacks receive it, `cancel`
    takes it). `on_chunk(key, audio, final)` receives its audio as it becomes ready, in order,
    the last piece (maybe empty) with `final`; `on_done(key, result)` the whole result, once.
    Both are called from the thread that runs the scheduler. `clock`: a listener plays the row
    as it comes (admission.py puts it first, holds its audio until it can play without a gap,
    and keeps the batch small enough for it)."""

    key: Hashable
    prompt: torch.Tensor  # [T, D] input embeddings, speaker embedding applied
    sampling: Sampling
    on_done: Callable[[Any, RowResult], None]
    on_chunk: Callable[[Any, np.ndarray, bool], None] | None = None
    clock: Clock | None = None
    last_chunk: int = 0  # tokens of its last chunk out
    cursor: Cursor = field(default_factory=Cursor)
    chunks: list[np.ndarray] = field(default_factory=list)
    playing: bool = False  # its chunks go out as they are made (a streamed row may be held)
    made_s: float = 0.0  # seconds of `chunks`
    sent_chunks: int = 0  # of `chunks`, those handed to `on_chunk`
    sent_s: float = 0.0  # their seconds

    def problem(self, context: int) -> str | None:
        """Why this row cannot run in a decoder of `context` positions; None when it can."""
        length, budget = self.prompt.size(0), self.sampling.max_new_token
        if length + budget > context:
            return (
                f"a prompt of {length} tokens plus a budget of {budget} audio tokens exceeds the "
                f"context of {context}: shorten the text"
            )
        if budget < 1:
            return f"an audio-token budget of {budget} is not positive"
        if not bool(torch.isfinite(self.prompt).all()):
            return "the prompt embedding holds NaN or infinite values (a broken voice?)"
        return None


@dataclass
class Counters:
    steps: int = 0
    shared_steps: int = 0  # steps that advanced two or more rows at once
    admitted: int = 0
    oom_shrinks: int = 0
    peak_rows: int = 0
    preempted: int = 0  # rows that gave their slot up to a stream (they start again later)
    held: int = 0  # streams whose first audio waited for a lead that lets them play gap-free
