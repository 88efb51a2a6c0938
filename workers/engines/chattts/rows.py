"""Segments as rows of the decode runtime: each row's prompt (its voice, its text as ChatTTS would
speak it, its speed) and sampling (its parameters and seed), fed one by one to a runtime that
keeps serving (continuous batching across the worker's jobs)."""

from __future__ import annotations

import hashlib
import logging
import secrets
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import torch

from workers.engines.base import ChunkSink, EngineCalls, EngineError, Segment
from workers.engines.chattts.library.params import (
    REPETITION_PENALTY,
    infer_params,
    row_generators,
    speed_level,
)
from workers.engines.chattts.library.sampling import Batch
from workers.engines.chattts.prompt import prompt_embeddings, spoken_text
from workers.engines.chattts.runtime.admission import Clock
from workers.engines.chattts.runtime.runtime import Runtime
from workers.engines.chattts.runtime.scheduler import RowRequest, RowResult, Sampling
from workers.engines.chattts.voices.speakers import Speakers

log = logging.getLogger(__name__)
# How long the serving loop sleeps when it has nothing to do before looking at its inbox again
# (a submission wakes it at once).
IDLE_WAIT_S = 0.05

RowDone = Callable[[Segment, RowResult], None]
Submitted = tuple[Segment, int, int, ChunkSink | None, RowDone, Clock | None]


def segment_seed(segment: Segment) -> int:
    """A segment's seed: from its job's seed (or a random base) and its segment (its one part,
    the ":0" that seeds have always ended with)."""
    base = segment.request.seed
    key = f"{base if base is not None else secrets.randbits(62)}:{segment.index}:0".encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") >> 1


class RuntimeRows:
    """All methods but `submit` and `cancel` run in the engine thread."""

    def __init__(
        self,
        model: Any,
        speakers: Speakers,
        runtime: Runtime,
        device: Any,
        whole_chat: Callable[[], Any],
    ) -> None:
        """`model`: the runtime's modules (assembly.Model); `whole_chat()`: ChatTTS's Chat, built
        on first use, for refinement."""
        self.model, self.speakers, self.runtime, self.device = model, speakers, runtime, device
        self.whole_chat = whole_chat
        self._inbox: deque[Submitted] = deque()
        self._wakeup = threading.Event()
        self._calls = EngineCalls(self._wakeup)
        self._lock = threading.Lock()

    def row(self, segment: Segment, seed: int, max_new_token: int) -> tuple[torch.Tensor, Sampling]:
        request, voice = segment.request, self.speakers.voice(segment)
        if request.refine:
            chat = self.whole_chat()
            _, refine = infer_params(request, voice, max_new_token)
            chat.batch = Batch(row_generators([seed], self.device))  # refinement's own draws
            try:
                text = spoken_text(self.model, segment.text, refine, chat)
            finally:
                chat.batch = None
        else:
            text = spoken_text(self.model, segment.text)
        prompt = prompt_embeddings(self.model, text, voice, f"[speed_{speed_level(request.speed)}]")
        sampling = Sampling(
            request.temperature,
            request.top_p,
            request.top_k,
            REPETITION_PENALTY,
            seed,
            max_new_token,
        )
        return prompt, sampling

    # -- continuous service ------------------------------------------------------------------

    def submit(
        self,
        segment: Segment,
        seed: int,
        max_new_token: int,
        on_chunk: ChunkSink | None,
        on_done: RowDone,
        clock: Clock | None = None,
    ) -> None:
        """Queue a segment for the serving loop (from any thread)."""
        with self._lock:
            self._inbox.append((segment, seed, max_new_token, on_chunk, on_done, clock))
        self._wakeup.set()

    def call(self, fn: Callable[[], Any]) -> Future[Any]:
        """Run `fn` in the serving loop's thread between two rounds (from any thread)."""
        return self._calls.call(fn)

    def cancel(self, segment: Segment) -> None:
        """Stop a segment at the runtime's next look (from any thread)."""
        self.runtime.scheduler.cancel(segment)

    def serve(self, stop: threading.Event) -> None:
        """Admit submitted segments and step the runtime until `stop` is set; rows still running
        then end as cancelled."""
        scheduler = self.runtime.scheduler
        while not stop.is_set():
            self._calls.run()
            self._admit()
            if scheduler.busy:
                scheduler.run_round()
            else:
                self._wakeup.wait(IDLE_WAIT_S)
                self._wakeup.clear()
        for row in list(scheduler.rows):
            scheduler.cancel(row.key)
        with self._lock:
            waiting = list(self._inbox)
            self._inbox.clear()
        for segment, *_, on_done, _ in waiting:
            on_done(segment, RowResult.failed("cancelled"))
        while scheduler.busy:
            scheduler.run_round()
        self._calls.run()

    def _admit(self) -> None:
        while True:
            with self._lock:
                if not self._inbox:
                    return
                segment, seed, budget, sink, on_done, clock = self._inbox.popleft()
            try:
                prompt, sampling = self.row(segment, seed, budget)
            except EngineError as exc:
                on_done(segment, RowResult.failed(str(exc)))
                continue
            # The segment is the row's key: the runtime hands it back with each piece and the
            # result, straight to the worker's sinks.
            request = RowRequest(segment, prompt, sampling, on_done, sink, clock=clock)
            self.runtime.scheduler.submit(request)
