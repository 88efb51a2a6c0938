"""bench.live's figures: per-session figures folded into p50/p95/max, the printed table, and the
suite's rows (its targets judged within the worker's capacity)."""

from __future__ import annotations

from typing import Any

from bench.lib.report import Row
from bench.lib.stats import percentile

SECTION = "9. live sessions"
GAP_FREE_MS = 100.0  # the target: under 100 ms of underrun in all, per session within capacity
BARGE_IN_MS = 100.0  # the target: barge-in p95
FIRST_RATIO = 1.5  # the target: live's first audio p95 at most 1.5x the sentence alone's
MODES = ("reference", "whole", "per-sentence", "live")


def summarize(sessions: list[dict[str, float]]) -> dict[str, Any]:
    """Each figure's p50, p95 and max over the sessions (and how many were under 100 ms of
    underrun, and the sessions' own figures)."""
    out: dict[str, Any] = {"sessions": sessions}
    for key in sessions[0]:
        values = [s[key] for s in sessions]
        out[key] = {
            "p50": round(percentile(values, 50), 1),
            "p95": round(percentile(values, 95), 1),
            "max": round(max(values), 1),
        }
    if "underrun_ms" in sessions[0]:
        out["gap_free"] = sum(s["underrun_ms"] < GAP_FREE_MS for s in sessions)
    if "stale_frames" in sessions[0]:
        out["stale_frames_total"] = int(sum(s["stale_frames"] for s in sessions))
        out["mid_answer"] = int(sum(s["mid_answer"] for s in sessions))
    return out


def _cell(figure: dict[str, float] | None, *keys: str) -> str:
    if figure is None:
        return " ".join(f"{'-':>6}" for _ in keys)
    return " ".join(f"{figure[k]:>6.0f}" for k in keys)


def first_ratio(row: dict[str, Any]) -> float:
    """live's first-audio p95 over the reference's (the first sentence alone)."""
    reference = max(float(row["reference"]["first_audio_ms"]["p95"]), 1.0)
    return round(float(row["live"]["first_audio_ms"]["p95"]) / reference, 2)


def brief(engine: str, row: dict[str, Any]) -> str:
    """One line as a round ends."""
    live, barge = row["live"], row["barge-in"]
    return (
        f"{engine} N={row['sessions']}: first audio p95 ms reference "
        f"{row['reference']['first_audio_ms']['p95']:.0f}, live {live['first_audio_ms']['p95']:.0f}"
        f", per-sentence {row['per-sentence']['first_audio_ms']['p95']:.0f}, whole "
        f"{row['whole']['first_audio_ms']['p95']:.0f}; live underrun max "
        f"{live['underrun_ms']['max']:.0f} ms; barge-in p95 {barge['barge_in_ms']['p95']:.0f} ms"
    )


def table(report: dict[str, Any]) -> str:
    lines = []
    head = (
        f"{'N':>3}  {'mode':<13}{'first audio p50/p95':>20} | {'underrun p50/p95/max':>20}"
        f" | {'last audio p50/p95':>13} | {'gap-free':>8}"
    )
    for engine, result in report["engines"].items():
        lines += [
            "",
            f"live sessions, {engine} (stream capacity {result['capacity_streams']}), ms; first"
            " audio after the first sentence's last token (reference: after its request),"
            " last audio after the last token",
            head,
        ]
        for row in result["rounds"]:
            n = row["sessions"]
            for mode in MODES:
                got = row[mode]
                under = got.get("underrun_ms") if mode != "reference" else None
                last = got.get("last_audio_ms") if mode != "reference" else None
                free = f"{got['gap_free']}/{n}" if mode != "reference" else "-"
                lines.append(
                    f"{n:>3}  {mode:<13}{_cell(got['first_audio_ms'], 'p50', 'p95'):>20} | "
                    f"{_cell(under, 'p50', 'p95', 'max'):>20} | {_cell(last, 'p50', 'p95'):>13}"
                    f" | {free:>8}"
                )
            barge = row["barge-in"]
            lines.append(
                f"{'':>3}  live: first audio p95 {first_ratio(row):.2f}x the reference's "
                f"(target <= {FIRST_RATIO}x); barge-in p50/p95/max "
                f"{_cell(barge['barge_in_ms'], 'p50', 'p95', 'max').strip()} ms (target p95 < "
                f"{BARGE_IN_MS:.0f}; {barge['mid_answer']}/{n} mid-answer), audio frames after "
                f"`cleared`: {barge['stale_frames_total']}"
            )
    for engine, why in report.get("engines_skipped", {}).items():
        lines.append(f"{engine}: skipped ({why})")
    return "\n".join(lines)


def rows(report: dict[str, Any]) -> list[Row]:
    """The suite's rows: for each engine and each N within the worker's capacity, live's first
    audio against the sentence alone, its worst underrun (baseline column: per-sentence
    requests') and its barge-in p95."""
    out = []
    for engine, result in report["engines"].items():
        capacity = result["capacity_streams"]
        for row in result["rounds"]:
            n = row["sessions"]
            if n > capacity:
                continue
            where = f"{n} session{'s' if n > 1 else ''}, {engine} (capacity {capacity})"
            ratio = first_ratio(row)
            under = row["live"]["underrun_ms"]["max"]
            barge = row["barge-in"]["barge_in_ms"]["p95"]
            out += [
                Row(
                    SECTION,
                    f"first audio p95, live / the first sentence alone, {where}",
                    ratio,
                    "ratio",
                    target=f"<= {FIRST_RATIO}",
                    met=ratio <= FIRST_RATIO,
                ),
                Row(
                    SECTION,
                    f"underrun, worst session, live (baseline: per-sentence requests), {where}",
                    under,
                    "ms",
                    row["per-sentence"]["underrun_ms"]["max"],
                    f"< {GAP_FREE_MS:.0f} ms",
                    under < GAP_FREE_MS,
                ),
                Row(
                    SECTION,
                    f"barge-in p95 (clear to the old text's last audio or cleared), {where}",
                    barge,
                    "ms",
                    target=f"< {BARGE_IN_MS:.0f} ms",
                    met=barge < BARGE_IN_MS,
                ),
            ]
    return out
