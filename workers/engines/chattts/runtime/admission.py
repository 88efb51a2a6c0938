"""Which waiting row goes into a free slot next, how many rows may step, and when a stream's first
audio goes out: the device is never left idle, and a listener who has started never hears a gap.

A listener with `m` seconds of audio in hand while `R` more are made at the row's speed `s` (x
real time) never runs dry when `s >= R / (m + R)`; the runtime asks that times the headroom `h`.
A *playing* stream (its audio goes out as it is made) gets that speed: rows join only while
every playing stream keeps it (capacity.py measures the speed at each row count), and rows that
are not streamed, then held streams, give their slot up when it is lost. A new stream is
*held* when it cannot play at once: it takes a free row and makes its audio, unsent, until what
it has made (its `m` once it plays) carries it. On a device faster than `h`, a stream plays from
its first chunk; on one below real time, streams batch like any other rows and each starts once
the rest of it can follow.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from workers.engines.chattts.runtime.capacity import StepTimes


class Clock(Protocol):
    """A listener's playback clock: audio sent against wall time since its first audio, and
    what the job still expects to make."""

    @property
    def segment_s(self) -> float:
        """Expected seconds of the segment in the runtime now (an estimate that errs long;
        inf: unknown, the row's token budget bounds it)."""

    @property
    def later_s(self) -> float:
        """Expected seconds of the job's segments after it."""

    @property
    def eager(self) -> bool:
        """Its first audio goes out at once, gaps or not (the client asked for it)."""

    def margin(self, now: float) -> float | None:
        """Seconds of audio the listener has in hand at `now` (time.monotonic()); None before
        its first audio."""


class Streamed(Protocol):
    clock: Clock | None
    playing: bool  # its audio goes out as it is made (False: held, or not streamed)
    sent_s: float  # seconds of its audio handed out


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
        """Rows the runtime steps in real time with headroom now (0: not even one): the streams
        that can start at their first chunk together."""
        if self.pinned_rows:
            return min(self.pinned_rows, max_rows)
        now, seen = time.monotonic(), len(self.step_times.seconds)
        at, seen_then, rows = self._cached
        if now - at >= CAPACITY_FRESH_S or seen != seen_then:  # old, or a row count is new
            rows = self.step_times.realtime_rows(max(self.headroom, 1.0))
            self._cached = (now, seen, rows)
        return min(rows, max_rows)

    def fast_enough(self, rows: int, need: float) -> bool:
        """Does every row step at `need` x real time or faster at `rows` rows? A pinned
        capacity stands for the headroom's speed up to it, falling in proportion beyond it
        (capacity.py's pessimistic guess); nothing measured yet: no need above 0."""
        if need <= 0:
            return True
        if self.pinned_rows:
            return max(self.headroom, 1.0) * min(1.0, self.pinned_rows / max(1, rows)) >= need
        measured = self.step_times.speed(rows)
        return measured is not None and measured >= need

    def need(self, in_hand: float, rest_s: float) -> float:
        """The speed (x real time) a stream needs so that its listener, with `in_hand` seconds
        to play while `rest_s` more are made, never runs dry: with `s` the row's speed the rest
        takes `rest/s` and the listener plays `in_hand + rest` in that time, so `s >= rest /
        (in_hand + rest)`, times the headroom (0 with nothing left to make)."""
        if rest_s <= 0:
            return 0.0
        headroom = max(self.headroom, 1.0)
        if math.isinf(rest_s):
            return headroom
        return headroom * rest_s / (max(0.0, in_hand) + rest_s)

    def playing_need(self, rows: Sequence[Streamed], rest: Sequence[float]) -> float:
        """The most speed a playing stream among `rows` needs (`rest[i]`: row i's seconds still
        to make); 0 while none plays. A stream whose first audio has not reached its listener
        yet has what was handed out for it in hand; an eager one asks for nothing."""
        now, most = time.monotonic(), 0.0
        for row, rest_s in zip(rows, rest, strict=True):
            clock = row.clock
            if clock is None or not row.playing or clock.eager:
                continue
            margin = clock.margin(now)
            most = max(most, self.need(margin if margin is not None else row.sent_s, rest_s))
        return most

    def releases(self, rows: int, made_s: float, rest_s: float) -> bool:
        """May a held stream with `made_s` made and `rest_s` still to make start playing now,
        at `rows` rows? Its lead is then what its listener has in hand."""
        return made_s > 0 and self.fast_enough(rows, self.need(made_s, rest_s))

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
