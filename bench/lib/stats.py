"""Figures from samples (percentiles and their summaries), and the error of a measurement that
must not be reported."""

from __future__ import annotations

from collections.abc import Sequence


class BenchError(Exception):
    """A measurement that must not be reported: a refused request, a lost event, a dead server."""


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    pos = (len(ordered) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def p99(values: Sequence[float]) -> float:
    """The 99th percentile by nearest rank (0 for no values)."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def stats(values: Sequence[float]) -> dict[str, float]:
    """n, p50/p90/p99, mean, min and max ({} for no values)."""
    if not values:
        return {}
    return {
        "n": len(values),
        "p50": percentile(values, 50),
        "p90": percentile(values, 90),
        "p99": percentile(values, 99),
        "mean": sum(values) / len(values),
        "min": min(values),
        "max": max(values),
    }


def ms_stats(values: Sequence[float]) -> dict[str, float]:
    """`stats` of seconds, in ms; no samples is an error (the measurement measured nothing)."""
    if not values:
        raise BenchError("no samples: the measurement measured nothing")
    return stats([v * 1000 for v in values])
