"""The suite's table: medians over the repeats, their ratio, targets judged on the medians."""

from __future__ import annotations

import math

from bench.lib.report import Row
from bench.summary import Line, fold, judge, markdown_table, section_number, text_table


def _row(
    ours: float, baseline: float | None, target: str | None = None, met: bool | None = None
) -> Row:
    return Row(
        "1. submit throughput", "req/s, 64 connections", ours, "req/s", baseline, target, met
    )


def test_fold_takes_medians_and_the_ratio_of_the_medians() -> None:
    runs = [[_row(900, 100)], [_row(1200, 300)], [_row(1000, 200)]]
    (row,) = fold(runs)
    assert (row.ours, row.baseline, row.runs) == (1000, 200, 3)
    assert row.ratio == 5.0


def test_fold_judges_the_target_on_the_medians_not_on_the_votes() -> None:
    # Two of three runs missed ">= 3x baseline", but the medians meet it.
    runs = [
        [_row(1000, 400, ">= 3x baseline", False)],
        [_row(3000, 300, ">= 3x baseline", True)],
        [_row(1000, 350, ">= 3x baseline", False)],
    ]
    assert fold(runs)[0].met is False  # medians 1000 vs 350: 2.9x
    runs[2] = [_row(1500, 350, ">= 3x baseline", False)]
    assert fold(runs)[0].met is True  # medians 1500 vs 350: 4.3x


def test_fold_falls_back_to_the_runs_verdicts_for_targets_it_cannot_read() -> None:
    target = "3x the baseline at a third of its p99"
    votes = [[_row(1, 1, target, True)], [_row(1, 1, target, True)], [_row(1, 1, target, False)]]
    assert fold(votes)[0].met is True
    votes[0] = [_row(1, 1, target, False)]
    assert fold(votes)[0].met is False


def test_fold_keeps_rows_apart_and_in_order_and_baseline_optional() -> None:
    a = Row("2. completion notice", "p50", 1.0, "ms", 50.0)
    b = Row("2. completion notice", "p99", 4.0, "ms", None, "< 10 ms")
    rows = fold([[a, b], [a, b]])
    assert [r.metric for r in rows] == ["p50", "p99"]
    assert rows[1].baseline is None and rows[1].ratio is None and rows[1].met is True


def test_judge_reads_the_targets_of_the_issue() -> None:
    assert judge("< 10 ms", 9.9, None) is True
    assert judge("< 10 ms", 10.0, None) is False
    assert judge("<= 50 KB", 50.0, None) is True
    assert judge(">= 5000 connections", 4999, None) is False
    assert judge(">= 3x baseline", 301, 100) is True
    assert judge(">= 3x baseline", 299, 100) is False
    assert judge("<= 1/3 of baseline", 33, 100) is True
    assert judge("<= 1/3 baseline p99", 34, 100) is False
    assert judge(">= 3x baseline", 300, None) is None  # nothing to compare with
    assert judge("fast enough", 1, 1) is None
    assert judge(None, 1, 1) is None


def test_tables_show_values_ratio_verdicts_and_sections_that_did_not_run() -> None:
    lines = [
        Line("1. submit throughput", fold([[_row(3500, 1000, ">= 3x baseline")]])[0]),
        Line("5. SSE capacity", note="skipped: bench.sse_capacity is not written yet"),
        Line("4. jobs/s end to end", note="FAILED: bench.endtoend exited 1"),
    ]
    text = text_table(lines)
    assert "3,500 req/s" in text and "1,000 req/s" in text and "3.50x" in text
    assert "| yes" in text and "skipped: bench.sse_capacity" in text and "FAILED" in text
    md = markdown_table(lines)
    assert md.splitlines()[0] == "| section | metric | ours | baseline | ratio | target | met |"
    assert md.count("\n") == 4
    assert "| 3,500 req/s | 1,000 req/s | 3.50x | >= 3x baseline | yes |" in md


def test_section_numbers() -> None:
    assert section_number("6. ChatTTS batching") == 6
    assert section_number("notes") is None
    assert math.isclose(fold([[_row(0.5, 0.25)]])[0].ratio or 0, 2.0)


def test_judge_reads_thousands_and_refuses_what_it_cannot_read() -> None:
    assert judge(">= 5,000", 200, None) is False
    assert judge(">= 5,000 connections", 5000, None) is True
    assert judge(">= 5000", 200, None) is False
    assert judge("< 50 KB per connection", 1, None) is None  # more than a unit: not read
    assert judge(">= 3x baseline", 3.0, 1.0) is True
    assert judge(">=3x baseline", 2.9, 1.0) is False
