"""How many rows the runtime can step in real time, measured as it runs: the seconds a step takes
at each number of rows, and the vocoder's seconds per second of audio, as moving averages.

A row is real-time when it gets `tokens_per_s` steps (audio tokens) per second of wall time; the
runtime's capacity is the most rows it can step with every row that much faster than real time
times the headroom. A row count never seen is estimated on the line between the nearest seen
either side; above the largest seen, as if a step's time grew in proportion to its rows (it never
grows faster on any device we measured, and on a GPU much slower): the estimate is pessimistic
until the row count has been seen, and grows as the runtime carries more.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Weight of a new round in a row count's average: about the last ten rounds count, so the
# estimate follows a device that slows down (another process on the CPU) within seconds.
SMOOTHING = 0.1


@dataclass
class StepTimes:
    slots: int
    tokens_per_s: float  # audio tokens per second of speech
    seconds: dict[int, float] = field(default_factory=dict)  # rows -> average seconds per step
    # The vocoder's seconds per second of audio, decoded in chunks (streams) and whole; a chunk
    # decodes its context too, so it costs more per second than a whole row.
    chunked: float | None = None
    whole: float | None = None
    # Before a chunk was measured: the whole decode's cost times this (a chunk's window over
    # its own tokens, from the runtime's configuration).
    chunk_overhead: float = 3.0

    def record(self, rows: int, steps: int, elapsed_s: float) -> None:
        """A round of `steps` steps at `rows` rows took `elapsed_s` (its look included)."""
        if rows < 1 or steps < 1 or elapsed_s <= 0:
            return
        per_step = elapsed_s / steps
        old = self.seconds.get(rows)
        # A new dict, not an update: other threads read the capacity (stats, heartbeats)
        # while the engine thread records, and iterate whichever dict they got.
        new = per_step if old is None else old + SMOOTHING * (per_step - old)
        self.seconds = {**self.seconds, rows: new}

    def forget(self) -> None:
        """Drop every measure (those of a warm-up, which ran cold code)."""
        self.seconds, self.chunked, self.whole = {}, None, None

    def decoded(self, chunked: bool, seconds: float, audio_s: float) -> None:
        """The vocoder took `seconds` for `audio_s` of audio (in a chunk, or a whole row)."""
        if audio_s <= 0:
            return
        cost = seconds / audio_s
        old = self.chunked if chunked else self.whole
        new = cost if old is None else old + SMOOTHING * (cost - old)
        if chunked:
            self.chunked = new
        else:
            self.whole = new

    def decode_cost(self) -> float:
        """The vocoder's seconds per second of streamed audio (0 before any decode)."""
        if self.chunked is not None:
            return self.chunked
        return self.whole * self.chunk_overhead if self.whole is not None else 0.0

    def step_s(self, rows: int) -> float | None:
        """Estimated seconds per step at `rows` rows; None before any measurement."""
        seconds = self.seconds
        if rows in seconds:
            return seconds[rows]
        below = [n for n in seconds if n < rows]
        above = [n for n in seconds if n > rows]
        if below and above:  # between two measures: on the line between them
            lo, hi = max(below), min(above)
            return seconds[lo] + (seconds[hi] - seconds[lo]) * (rows - lo) / (hi - lo)
        if below:
            n = max(below)
            return seconds[n] * rows / n
        return seconds[min(above)] if above else None  # fewer rows are never slower

    def speed(self, rows: int) -> float | None:
        """Each row's speed at `rows` streamed rows: seconds of speech per second of wall time.
        A second of each row's speech costs `tokens_per_s` steps, and the vocoder decodes it
        in chunks for every row."""
        step = self.step_s(rows)
        if step is None:
            return None
        return 1 / (step * self.tokens_per_s + rows * self.decode_cost())

    def realtime_rows(self, headroom: float) -> int:
        """The most rows (up to the slots) each at least `headroom` times real time; 0 when not
        even one row is (or nothing was measured yet)."""
        best = 0
        for rows in range(1, self.slots + 1):
            speed = self.speed(rows)
            if speed is None or speed < headroom:
                break
            best = rows
        return best
