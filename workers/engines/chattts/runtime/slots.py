"""Which waiting row takes a free slot, and which running row gives its slot up: the scheduler's
side of admission.py (streams first, playing streams kept at the speed they need, held streams
in free rows), mixed into the SlotScheduler, which owns the slots."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Hashable

from workers.engines.chattts.runtime.admission import Admission
from workers.engines.chattts.runtime.requests import Counters, RowRequest, RowResult
from workers.engines.chattts.runtime.vocoder import Vocoder


class SlotAdmission:
    """Mixed into the SlotScheduler, which provides the slots, the waiting rows and the lock."""

    admission: Admission
    counters: Counters
    vocoder: Vocoder
    stream_tokens: int
    max_rows: int
    rows: list[RowRequest]
    position_bound: list[int]
    _waiting: deque[RowRequest]
    _cancelled: set[Hashable]
    _lock: threading.Lock
    _finish: Callable[[RowRequest, RowResult], None]
    _release: Callable[[int], None]

    def _take_waiting(self) -> RowRequest | None:
        """The next row to admit (admission.py's pick), if it fits (`_fits`); a stream that
        does not takes the slot of a row that is not streamed, when there is one."""
        with self._lock:
            while self._waiting:
                index = self.admission.pick(self._waiting)
                request = self._waiting[index]
                if request.key in self._cancelled:
                    del self._waiting[index]
                    self._cancelled.discard(request.key)
                    self._finish(request, RowResult.failed("cancelled"))
                    continue
                if self._fits(request):
                    self._waiting.remove(request)  # (by identity; a preempted row went in front)
                    if request.clock is not None and not (request.playing or request.chunks):
                        self.counters.held += 1
                    return request
                if not (request.clock and self.admission.on and self._preempt()):
                    return None
        return None

    def _fits(self, request: RowRequest) -> bool:
        """May `request` join the rows now, and does its audio go out as it is made? A row
        joins while every playing stream keeps the speed it needs (admission.py); a stream
        already heard (its job's next segment) joins regardless. A new stream plays from its
        first chunk when it can at once, else it is held (eagerly: played from its first
        chunk, gaps or not). Called with the lock held."""
        clock, rows = request.clock, len(self.rows)
        if rows >= self.max_rows:
            return False
        request.playing = request.on_chunk is not None  # unless held, below
        if not self.admission.on:
            return True
        if clock is not None and clock.margin(time.monotonic()) is not None:
            return True  # its listener is listening: it must go on
        need = self.admission.playing_need(self.rows, [self._rest_s(i) for i in range(rows)])
        if clock is not None:
            own = self.admission.need(0.0, self._rest_s_of(request, 0))
            request.playing = clock.eager or self.admission.fast_enough(rows + 1, max(need, own))
        return self.admission.fast_enough(rows + 1, need)

    def _rest_s(self, slot: int) -> float:
        """Seconds of audio the row in `slot` (and its job after it) still has to make."""
        row = self.rows[slot]
        return self._rest_s_of(row, self.position_bound[slot] - row.prompt.size(0) + 1)

    def _rest_s_of(self, row: RowRequest, generated: int) -> float:
        """Seconds still to make after `generated` tokens: at most the row's token budget, and
        its clock's estimate of the segment when that is shorter (never less than a chunk
        while the row runs), plus the segments after it."""
        per_s = self.vocoder.tokens_per_s
        left = max(0, row.sampling.max_new_token - generated) / per_s
        if row.clock is None:
            return left
        estimate = max(row.clock.segment_s - generated / per_s, self.stream_tokens / per_s)
        return min(left, estimate) + row.clock.later_s

    def _preempt(self, held: bool = False) -> bool:
        """The youngest row that sent nobody anything gives its slot up (`held`: or, when there
        is none, the youngest held stream): it waits again, first in line, and starts again
        from its prompt (its draws being counter-based, it mostly retraces its codes; what a
        held stream made is kept). Called with the lock held. False: no such row."""
        young = [
            (self.position_bound[slot] - row.prompt.size(0), slot)
            for slot, row in enumerate(self.rows)
            if row.clock is None and row.on_chunk is None
        ]
        if not young and held:
            young = [
                (self.position_bound[slot] - row.prompt.size(0), slot)
                for slot, row in enumerate(self.rows)
                if row.clock is not None and not row.playing
            ]
        if not young:
            return False
        _, slot = min(young)
        row = self.rows[slot]
        self._release(slot)
        self._waiting.appendleft(row)
        self.counters.preempted += 1
        return True

    def _make_way(self) -> None:
        """Rows give their slot up while a playing stream lacks the speed it needs (the speed
        fell, or its lead ran down): rows that are not streamed at once, held streams only
        when the stream would run dry (without the headroom: they lose what they computed)."""
        if not self.admission.on:
            return
        with self._lock:
            while True:
                rows = len(self.rows)
                rest = [self._rest_s(i) for i in range(rows)]
                need = self.admission.playing_need(self.rows, rest)
                if self.admission.fast_enough(rows, need):
                    return
                dry = not self.admission.fast_enough(rows, need / self.admission.headroom)
                if not self._preempt(held=dry):
                    return
