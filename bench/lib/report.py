"""The one report: figures as rows (ours beside the baseline and the target), printed as a table
and written as JSON (`{"rows": [...], "raw": {...}}`, or any figures)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Row:
    """A figure of ours beside the baseline's (when the baseline has one) and its target."""

    section: str  # "1. submit throughput", "5. SSE capacity" ... (the suite's numbering)
    metric: str  # what was measured, e.g. "requests/s, 64 connections, POST /v1/tts/jobs"
    ours: float  # the median over the repeats
    unit: str  # "req/s", "ms", "KB", "jobs/s", "audio-s/s", "connections"
    baseline: float | None = None  # the baseline's median under the same load, if it has one
    target: str | None = None  # the target in words, e.g. ">= 3x baseline, p99 <= 1/3"
    met: bool | None = None  # None: no target for this row
    runs: int = 1  # how many repeats the median is over

    @property
    def ratio(self) -> float | None:
        """ours / baseline (None without a baseline figure)."""
        if self.baseline is None or self.baseline == 0:
            return None
        return self.ours / self.baseline

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ratio": self.ratio}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Row:
        fields = {k: v for k, v in data.items() if k != "ratio"}
        return cls(**fields)


def render(rows: Sequence[Row]) -> str:
    """The rows as a text table: metric, ours, unit, baseline, ratio, target (met or MISSED)."""
    width = max([58, *(len(row.metric) for row in rows)])
    lines = [f"{'metric':{width}} {'ours':>9} {'unit':9} {'baseline':>9} {'ratio':>6}  target"]
    for row in rows:
        base = f"{row.baseline:9.2f}" if row.baseline is not None else f"{'-':>9}"
        ratio = f"{row.ratio:6.2f}" if row.ratio is not None else f"{'-':>6}"
        met = {True: "met", False: "MISSED", None: ""}[row.met]
        target = f"{row.target} {met}" if row.target else ""
        lines.append(f"{row.metric:{width}} {row.ours:9.2f} {row.unit:9} {base} {ratio}  {target}")
    return "\n".join(lines)


def write_json(path: str | Path, data: Any) -> None:
    """`data` as indented JSON at `path` (its folder made)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def write(path: Path, rows: Sequence[Row], raw: dict[str, Any], skipped: str | None = None) -> None:
    """A measurement's rows and raw figures (`skipped`: why there are none on this machine)."""
    out: dict[str, Any] = {"rows": [r.to_json() for r in rows], "raw": raw}
    if skipped is not None:
        out["skipped"] = skipped
    write_json(path, out)


def figures(data: Any, output: str | Path | None) -> None:
    """Figures printed as JSON, and written to `output` too when given."""
    print(json.dumps(data, indent=2))
    if output:
        write_json(output, data)
