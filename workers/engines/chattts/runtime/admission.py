"""Which waiting row goes into a free slot next, and how many rows may step while a listener is
playing: streamed rows first (the one whose listener has the least audio in hand leads), and no
more rows than the runtime steps in real time with headroom (capacity.py), so that a row that is
not streamed never slows a stream down; it waits, or gives its slot up, instead.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from workers.engines.chattts.runtime.capacity import StepTimes


class Clock(Protocol):
    """A listener's playback clock: audio sent against wall time since its first audio."""

    def margin(self, now: float) -> float | None:
        """Seconds of audio the listener has in hand at `now` (time.monotonic()); None before
        its first audio."""


class Streamed(Protocol):
    clock: Clock | None


# How long a computed capacity is used before it is computed again: it moves with averages of
# many rounds, and computing it scans every row count (on a GPU a round takes milliseconds).
CAPACITY_FRESH_S = 0.25


@dataclass
class Admission:
    step_times: StepTimes
    headroom: float = 1.25  # 0: off (rows are admitted first come, first served, as they fit)
    pinned_rows: int = 0  # the operator's capacity in rows; 0: measured
    _cached: tuple[float, int, int] = (-CAPACITY_FRESH_S, -1, 0)  # (when, row counts seen, rows)

    @property
    def on(self) -> bool:
        return self.headroom > 0

    def capacity(self, max_rows: int) -> int:
        """Rows the runtime steps in real time with headroom now (0: not even one)."""
        if self.pinned_rows:
            return min(self.pinned_rows, max_rows)
        now, seen = time.monotonic(), len(self.step_times.seconds)
        at, seen_then, rows = self._cached
        if now - at >= CAPACITY_FRESH_S or seen != seen_then:  # old, or a row count is new
            rows = self.step_times.realtime_rows(max(self.headroom, 1.0))
            self._cached = (now, seen, rows)
        return min(rows, max_rows)

    def row_limit(self, rows: Sequence[Streamed], max_rows: int) -> int:
        """How many rows may step while these run: the capacity while a stream is among them
        (at least the streams themselves, at least one), else every slot."""
        if not self.on:
            return max_rows
        streams = sum(row.clock is not None for row in rows)
        if not streams:
            return max_rows
        return max(1, streams, self.capacity(max_rows))

    def room(self, rows: Sequence[Streamed], joining: Streamed, max_rows: int) -> int:
        """How many rows may step once `joining` joins these: every slot for a stream whose
        listener is listening already (it must go on) and while no stream is involved, else the
        capacity (a new stream waits for it: it is not admitted at the others' cost)."""
        if not self.on:
            return max_rows
        if joining.clock is not None and joining.clock.margin(time.monotonic()) is not None:
            return max_rows
        streams = sum(row.clock is not None for row in rows)
        if joining.clock is None and not streams:
            return max_rows
        return max(1, streams, self.capacity(max_rows))

    def chunk_tokens(self, emitted: int, last: int, first: int, most: int) -> int:
        """A row's next chunk, in tokens (`emitted` so far, the `last` chunk's size). With
        admission on, chunks grow from the first by the headroom each time (8, 10, 12, 15 ...
        up to `most`): each is made, at the headroom's speed, while the listener plays the one
        before, so a listener that starts at the first chunk never runs dry waiting for a long
        second one."""
        if emitted == 0:
            return first
        if not self.on or self.headroom <= 1:
            return most
        return min(most, max(last + 1, int(last * self.headroom)))

    def pick(self, waiting: Sequence[Streamed]) -> int:
        """The index of the waiting row to admit next: a stream before any other row; among
        streams, the one whose listener has the least audio in hand (one waiting for its first
        audio counts as having none); else the oldest."""
        if not self.on:
            return 0
        now, best, best_margin = time.monotonic(), 0, float("inf")
        for i, row in enumerate(waiting):
            if row.clock is None:
                continue
            margin = row.clock.margin(now)
            margin = 0.0 if margin is None else margin
            if margin < best_margin:
                best, best_margin = i, margin
        return best
