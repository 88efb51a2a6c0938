"""The suite's one table: the rows of every run of every module, folded into medians over the
repeats, the ratio of the medians, each target judged again on the medians; as text and Markdown.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bench.lib.report import Row

HEADER = ("section", "metric", "ours", "baseline", "ratio", "target", "met")

# "< 10 ms", ">= 5000 connections", ">= 3x baseline", "<= 1/3 of baseline p99", "≤ 50 KB"
_NUMBER = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"  # 5000, 5,000, 0.5
_TARGET = re.compile(
    rf"\s*(?P<op><=|>=|<|>|≤|≥)\s*(?P<num>{_NUMBER})(?:\s*/\s*(?P<den>{_NUMBER}))?"
    r"(?:\s*(?P<times>x|×))?(?:\s+(?:of\s+)?(?P<base>baseline)(?:'s)?)?"
    r"(?:\s+(?P<unit>\S+))?\s*"  # one trailing word at most: a unit, "p99"
)


@dataclass(frozen=True)
class Line:
    """A line of the table: a folded row, or a section that did not run (skipped or failed)."""

    section: str
    row: Row | None = None
    note: str = ""  # "skipped: ...", "FAILED: ..." when row is None


def judge(target: str | None, ours: float, baseline: float | None) -> bool | None:
    """The target checked against these figures; None when it cannot be read (or is None)."""
    if not target:
        return None
    m = _TARGET.fullmatch(target)
    if m is None:
        return None
    threshold = float(m["num"].replace(",", "")) / float((m["den"] or "1").replace(",", ""))
    if m["base"]:
        if baseline is None:
            return None
        threshold *= baseline
    elif m["times"]:
        return None  # "3x" of what?
    op = m["op"]
    if op == "<":
        return ours < threshold
    if op in ("<=", "≤"):
        return ours <= threshold
    if op == ">":
        return ours > threshold
    return ours >= threshold


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def fold(runs: Sequence[Sequence[Row]]) -> list[Row]:
    """Rows of several runs of one module -> one row per (section, metric), in first-seen order:
    medians of ours and baseline, the target judged on the medians (where it can be read; else
    met when more than half of the runs met it)."""
    groups: dict[tuple[str, str], list[Row]] = {}
    for run in runs:
        for row in run:
            groups.setdefault((row.section, row.metric), []).append(row)
    out = []
    for rows in groups.values():
        first = rows[0]
        ours = median([r.ours for r in rows])
        bases = [r.baseline for r in rows if r.baseline is not None]
        baseline = median(bases) if bases else None
        met = judge(first.target, ours, baseline)
        if met is None and first.target:
            votes = [r.met for r in rows if r.met is not None]
            met = sum(votes) > len(votes) / 2 if votes else None
        out.append(
            Row(
                first.section,
                first.metric,
                ours,
                first.unit,
                baseline,
                first.target,
                met,
                len(rows),
            )
        )
    return out


def section_number(section: str) -> int | None:
    head = section.split(".", 1)[0].strip()
    return int(head) if head.isdigit() else None


def fmt(value: float | None, unit: str = "") -> str:
    if value is None or math.isnan(value):
        return "-"
    if abs(value) >= 1000:
        text = f"{value:,.0f}"
    elif abs(value) >= 100:
        text = f"{value:.0f}"
    elif abs(value) >= 10:
        text = f"{value:.1f}"
    else:
        text = f"{value:.2f}"
    return f"{text} {unit}".strip()


def cells(line: Line) -> tuple[str, ...]:
    row = line.row
    if row is None:
        return (line.section, line.note, "", "", "", "", "")
    ratio = row.ratio
    met = {True: "yes", False: "NO", None: ""}[row.met]
    return (
        row.section,
        row.metric + (f" [{row.runs} runs]" if row.runs > 1 else ""),
        fmt(row.ours, row.unit),
        fmt(row.baseline, row.unit),
        "-" if ratio is None else (f"{ratio:.2f}x" if ratio >= 0.1 else f"{ratio:.2g}x"),
        row.target or "",
        met,
    )


def text_table(lines: Iterable[Line]) -> str:
    table = [HEADER, *(cells(line) for line in lines)]
    widths = [max(len(r[i]) for r in table) for i in range(len(HEADER))]
    widths[1] = min(widths[1], 90)
    out = []
    for i, r in enumerate(table):
        out.append(
            " | ".join(
                c.rjust(w) if 2 <= k <= 4 else c.ljust(w)
                for k, (c, w) in enumerate(zip(r, widths, strict=True))
            ).rstrip()
        )
        if i == 0:
            out.append("-+-".join("-" * w for w in widths))
    return "\n".join(out)


def markdown_table(lines: Iterable[Line]) -> str:
    out = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for line in lines:
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells(line)) + " |")
    return "\n".join(out)
