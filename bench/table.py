"""One row of the benchmark table: every measurement module reports its figures as rows."""

from __future__ import annotations

from dataclasses import asdict, dataclass
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
