"""Streams first, never at the device's cost: a stream takes the slot of a row that is not
streamed, rows join only while playing streams keep the speed they need, streams that cannot
play at once are held in free rows until their lead carries them, and the capacity is measured."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

from tests.workers.engines.chattts.conftest import requires_chattts
from tests.workers.engines.chattts.runtime.helpers import Rows, mixed_prompts, scheduler
from workers.engines.base import PlaybackClock
from workers.engines.chattts.runtime.admission import Admission
from workers.engines.chattts.runtime.capacity import StepTimes
from workers.engines.chattts.runtime.scheduler import Sampling

pytestmark = [
    pytest.mark.chattts,
    requires_chattts,
    pytest.mark.filterwarnings("ignore:.*past_key_values.*:FutureWarning"),
]
TOKENS_PER_S = 46.875


def test_step_times_estimate_unseen_row_counts_pessimistically() -> None:
    times = StepTimes(slots=8, tokens_per_s=TOKENS_PER_S)
    assert times.step_s(1) is None and times.realtime_rows(1.0) == 0
    times.record(2, 4, 4 * 0.008)  # 8 ms a step at two rows
    assert times.step_s(2) == pytest.approx(0.008)
    assert times.step_s(1) == pytest.approx(0.008)  # fewer rows are never slower
    assert times.step_s(4) == pytest.approx(0.016)  # in proportion beyond what was seen
    # Real time is a step per 1/46.875 s (21.3 ms): at 1.25x, 17 ms a step: 4 rows at 4 ms each.
    assert times.realtime_rows(1.25) == 4
    times.record(4, 4, 4 * 0.010)  # 4 rows measured faster than the estimate: 6 fit
    assert times.realtime_rows(1.25) == 6
    for _ in range(200):  # the device slows down: the average follows it
        times.record(4, 4, 4 * 0.05)
    assert times.step_s(3) == pytest.approx(0.029, rel=0.01)  # between 2 and 4 rows
    assert times.realtime_rows(1.25) == 2  # (2 rows were last seen at 8 ms)
    assert times.speed(4) == pytest.approx(1 / (0.05 * TOKENS_PER_S), rel=0.01)


def test_the_vocoders_cost_per_stream_lowers_the_capacity() -> None:
    """Each streamed row's audio is decoded in chunks: a second of audio that takes the vocoder
    20 ms costs every row 20 ms per second of speech (before a chunk was measured: a whole
    decode's cost times the chunks' overhead)."""
    times = StepTimes(slots=64, tokens_per_s=TOKENS_PER_S, chunk_overhead=4.0)
    times.record(8, 4, 4 * 0.004)  # half a millisecond a row a step
    assert times.realtime_rows(1.25) == 34  # 34 rows: 17 ms a step
    times.decoded(False, 0.005, 1.0)  # a whole row: 5 ms a second, 20 ms in chunks
    assert times.decode_cost() == pytest.approx(0.020)
    assert times.realtime_rows(1.25) == 18  # 18 rows x (23.4 ms + 20 ms) a second <= 0.8 s
    times.decoded(True, 0.010, 1.0)  # measured in chunks: 10 ms a second
    assert times.decode_cost() == pytest.approx(0.010)
    assert times.realtime_rows(1.25) == 23


def test_the_listener_with_the_least_audio_in_hand_is_admitted_first() -> None:
    admission = Admission(StepTimes(slots=8, tokens_per_s=TOKENS_PER_S))
    ahead, behind, new = PlaybackClock(), PlaybackClock(), PlaybackClock()
    now = time.monotonic()
    ahead.first_at, ahead.sent_s = now - 2, 4.0  # two seconds in hand
    behind.first_at, behind.sent_s = now - 2, 2.5  # half a second
    waiting: list[Any] = [
        Waiting(None),
        Waiting(ahead),
        Waiting(behind),
        Waiting(new),  # waiting for its first audio: none in hand
    ]
    assert admission.pick(waiting) == 3
    behind.sent_s = 1.0  # it has been waiting a second: it goes first
    assert admission.pick(waiting) == 2
    assert admission.pick([Waiting(None), Waiting(None)]) == 0
    assert Admission(admission.step_times, headroom=0).pick(waiting) == 0  # off: in order


class Waiting:
    def __init__(self, clock: PlaybackClock | None) -> None:
        self.clock = clock


def test_a_stream_takes_the_slot_of_the_youngest_row_that_is_not_streamed(
    endless_chat: Any,
) -> None:
    """Both slots hold rows nobody listens to: a stream arriving gets its first audio before
    either ends (the youngest gave its slot up, and still ends with all its tokens). Without
    admission, the stream waits for a row to end."""
    prompts = mixed_prompts(endless_chat, 3)
    budget = Sampling(seed=1, max_new_token=96)
    for headroom, first_before_any_end in ((1.0, True), (0.0, False)):
        run = scheduler(endless_chat, slots=2, headroom=headroom, stream_rows=2)
        rows = Rows()
        for i in range(2):
            run.submit(rows.request(i, prompts[i], budget, streamed=False))
        for _ in range(3):
            run.run_round()
        assert len(run.rows) == 2
        run.submit(rows.request("stream", prompts[2], budget, clock=PlaybackClock()))
        run.run()
        first = rows.log.index(("first", "stream"))
        ends = [rows.log.index(("done", i)) for i in range(2)]
        assert (first < min(ends)) is first_before_any_end, (headroom, rows.log)
        assert all(rows.results[i].tokens == 96 and not rows.results[i].error for i in range(2))
        assert run.counters.preempted == (1 if first_before_any_end else 0)


def test_a_streams_need_follows_its_lead() -> None:
    """The speed a stream needs: the headroom with nothing in hand, less as its lead grows
    against what is left to make, nothing once nothing is; a held stream starts once the
    speed at the rows running is enough (a pinned capacity: within it only)."""
    times = StepTimes(slots=8, tokens_per_s=TOKENS_PER_S)
    admission = Admission(times, headroom=1.5)
    assert admission.need(0.0, 2.0) == pytest.approx(1.5)
    assert admission.need(1.0, 1.0) == pytest.approx(0.75)
    assert admission.need(3.0, 0.0) == 0.0
    assert admission.need(0.0, float("inf")) == pytest.approx(1.5)
    assert admission.fast_enough(4, 0.0) and not admission.fast_enough(1, 0.1)  # not measured
    # Half real time for one row (a step takes two 46.875ths of a second), a third at two.
    times.record(1, 4, 4 * 2 / TOKENS_PER_S)
    times.record(2, 4, 4 * 3 / TOKENS_PER_S)
    assert times.speed(1) == pytest.approx(0.5) and admission.capacity(8) == 0
    assert not admission.releases(1, made_s=0.5, rest_s=1.0)  # needs 1.0x
    assert admission.releases(1, made_s=2.0, rest_s=1.0)  # needs 0.5x: it has it
    assert not admission.releases(2, made_s=2.0, rest_s=1.0)  # not at two rows (1/3x)
    assert admission.releases(2, made_s=1.0, rest_s=0.0)  # made whole: it plays
    assert not admission.releases(2, made_s=0.0, rest_s=0.0)  # nothing to play yet
    pinned = Admission(times, headroom=1.5, pinned_rows=2)
    assert pinned.fast_enough(2, 1.5) and not pinned.fast_enough(3, 1.01)
    assert pinned.fast_enough(3, 1.0) and not pinned.fast_enough(4, 0.76)  # 1.5 x 2/4


def test_streams_beyond_the_capacity_wait_for_the_playing_ones_lead(endless_chat: Any) -> None:
    """A capacity of two streams: of three, two play from their first chunk; the third, and a
    row nobody listens to, join once the two have a lead that lets them (this CPU makes the
    tiny model faster than real time), so the four rows share the device; no listener waits
    once it has started. Without admission all four start at once."""
    prompts = mixed_prompts(endless_chat, 4)
    budget = Sampling(seed=2, max_new_token=64)
    for headroom in (1.0, 0.0):
        run = scheduler(endless_chat, slots=4, headroom=headroom, stream_rows=2)
        rows = Rows()
        clocks = [PlaybackClock() for _ in range(3)]
        for i in range(3):
            run.submit(rows.request(i, prompts[i], budget, clock=clocks[i]))
        run.submit(rows.request("other", prompts[3], budget, streamed=False))
        run.run_round()
        assert len(run.rows) == (2 if headroom else 4)
        run.run()
        assert run.counters.peak_rows >= 3, headroom
        assert all(not r.error and r.tokens == 64 for r in rows.results.values())
        if headroom:
            assert rows.log.index(("first", 2)) > rows.log.index(("first", 1))
            for i, clock in enumerate(clocks):  # each listener got its audio before it ran dry
                assert clock.margin(time.monotonic()) is not None, i


def test_streams_on_a_device_below_real_time_are_batched_and_held(endless_chat: Any) -> None:
    """A device slower than any stream needs (a headroom no speed meets): the streams are
    batched with each other and with other rows instead of taken one at a time, and each
    one's audio is held until the rest can follow without a gap (here: until it is made), then
    goes out whole and in order. Held streams are counted."""
    prompts = mixed_prompts(endless_chat, 4)
    budget = Sampling(seed=3, max_new_token=48)
    run = scheduler(endless_chat, slots=4, headroom=1e6)
    rows = Rows()
    for i in range(3):
        run.submit(rows.request(i, prompts[i], budget, clock=PlaybackClock()))
    run.submit(rows.request("other", prompts[3], budget, streamed=False))
    run.run()
    assert run.counters.peak_rows == 4
    assert run.counters.held == 3
    for i in range(3):
        first, done = rows.log.index(("first", i)), rows.log.index(("done", i))
        assert first < done and all(entry[1] != i for entry in rows.log[first + 1 : done]), (
            rows.log
        )  # no chunk before it was whole
        joined = np.concatenate(rows.chunks[i])
        np.testing.assert_array_equal(joined, rows.results[i].audio)


def test_an_eager_stream_plays_from_its_first_chunk(endless_chat: Any) -> None:
    """A client that asked for its audio at once gets its first chunk while its row runs, on
    the same device that holds other streams."""
    prompts = mixed_prompts(endless_chat, 2)
    budget = Sampling(seed=4, max_new_token=96)
    run = scheduler(endless_chat, slots=2, headroom=1e6)
    rows = Rows()
    run.submit(rows.request("held", prompts[0], budget, clock=PlaybackClock()))
    run.submit(rows.request("eager", prompts[1], budget, clock=PlaybackClock(eager=True)))
    run.run()
    assert len(rows.chunks["eager"]) > 1 and len(rows.chunks["held"]) >= 1
    assert rows.log.index(("first", "eager")) < rows.log.index(("done", "eager"))
    assert run.counters.held == 1


def test_the_capacity_is_measured_as_rows_run(endless_chat: Any) -> None:
    """Nothing measured, nothing carried; after a run, the steps and the vocoder's chunks are
    measured, and the capacity is what they give (this machine's speed decides how much)."""
    run = scheduler(endless_chat, slots=4, headroom=1.25)
    assert run.stream_capacity == 0  # nothing measured yet
    rows = Rows()
    for i, p in enumerate(mixed_prompts(endless_chat, 4)):
        run.submit(rows.request(i, p, Sampling(seed=i, max_new_token=64), clock=PlaybackClock()))
    run.run()
    assert set(run.step_times.seconds) >= {4}  # unmeasured, the streams ran held, together
    speed = run.step_times.speed(1)
    assert speed is not None and speed > 0
    assert run.step_times.chunked is not None and run.step_times.chunked > 0
    assert run.stream_capacity == min(4, run.step_times.realtime_rows(1.25))
    assert (run.stream_capacity >= 1) == (speed >= 1.25)
