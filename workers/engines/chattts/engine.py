"""ChatTTS on our decode runtime (`runtime/`, fed by `rows.py`): segments join the running batch
between two steps and leave it as they end (continuous batching), their audio streamed in chunks.
`CHATTTS_RUNTIME=library` is `library_engine.py` instead (see `__init__.create`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from workers.engines.base import ChunkSink, EngineError, Segment, SegmentDone, run_segments
from workers.engines.chattts.loading import assembly
from workers.engines.chattts.model import ChatTTSModel
from workers.engines.chattts.rows import RuntimeRows, segment_seed
from workers.engines.chattts.runtime.admission import Clock
from workers.engines.chattts.runtime.requests import RowResult
from workers.engines.chattts.runtime.runtime import Runtime, RuntimeConfig


class ChatTTSEngine(ChatTTSModel):
    """ChatTTS on our decode runtime: segments join the running batch between two steps and
    leave it as they end (continuous batching), their audio streamed in chunks."""

    rows: RuntimeRows | None = None

    @property
    def waiting_room(self) -> int:
        return self.max_batch  # as many waiting as the runtime has slots

    def _loaded(self, model: assembly.Model) -> None:
        s = self.settings
        config = RuntimeConfig(
            slots=self.max_batch,
            context=s.chattts.context,
            stream_tokens=s.chattts.stream_tokens,
            first_chunk_tokens=s.chattts.first_chunk_tokens,
            lookahead_tokens=s.chattts.lookahead_tokens,
            dtype=s.chattts.dtype,
            headroom=s.scheduling.stream_headroom
            if s.scheduling.stream_admission == "capacity"
            else 0.0,
            stream_rows=s.scheduling.stream_capacity,
        )
        try:
            self.runtime = Runtime(model, self.max_new_token, config)
        except ValueError as exc:
            raise EngineError(f"cannot build the decode runtime: {exc}") from exc
        self.rows = RuntimeRows(model, self._speakers, self.runtime, self.device, self.whole_chat)

    def _warm(self, segment: Segment) -> None:
        run_segments(self, [segment])
        assert self.runtime is not None  # its one round ran cold code: no measure of capacity
        self.runtime.scheduler.step_times.forget()

    def _rows(self) -> RuntimeRows:
        if self.rows is None:
            raise EngineError("the chattts engine was not loaded", retryable=True)
        return self.rows

    def submit(
        self,
        segment: Segment,
        on_chunk: ChunkSink | None,
        on_done: SegmentDone,
        clock: Clock | None = None,
    ) -> None:
        """Queue one segment for `serve` (from any thread); `on_done` gets its result."""
        seed = segment_seed(segment)

        def done(segment: Segment, result: RowResult) -> None:  # in the engine thread
            if result.truncated:
                self.truncated(segment)
            on_done(segment, result)

        self._rows().submit(segment, seed, self.max_new_token, on_chunk, done, clock)

    def cancel(self, segment: Segment) -> None:
        if self.rows is not None:
            self.rows.cancel(segment)

    def call(self, fn: Callable[[], Any]) -> Future[Any]:
        """Run `fn` in the engine thread between two steps of `serve` (from any thread)."""
        return self._rows().call(fn)

    def serve(self, stop: threading.Event) -> None:
        """The engine thread's loop: admit submitted segments, step, until `stop` is set."""
        self._rows().serve(stop)
