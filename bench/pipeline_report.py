"""The pipeline benchmark's results as a table, ours next to the baseline with their ratio."""

from __future__ import annotations

from typing import Any

from bench.lib.runs import STAGES

LABELS = {
    "job_sse": "job SSE",
    "events": "/v1/events SSE",
    "ws": "WebSocket",
    "legacy_poll": "legacy poll",
}


def _get(section: dict[str, Any], mode: str, *path: str) -> float | None:
    value: Any = section.get(mode)
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return float(value) if isinstance(value, int | float) else None


Row = tuple[str, float | None, float | None]


def table_rows(results: dict[str, Any], poll_ms: int) -> list[Row]:
    return _light_rows(results, poll_ms) + _load_rows(results["load"])


def _light_rows(results: dict[str, Any], poll_ms: int) -> list[Row]:
    """One user at a time: each way of following a job against the baseline's polling."""
    light = results["light"]
    rows: list[Row] = []
    base_note = f"baseline polls every {poll_ms} ms"
    rows.append((f"LIGHT LOAD (1 user, sequential; {base_note})", None, None))
    for mode in ("job_sse", "events", "ws", "legacy_poll"):
        if mode not in light:
            continue
        what = "DONE" if mode == "legacy_poll" else "succeeded"
        for q in ("p50", "p99", "mean"):
            rows.append(
                (
                    f"  submit->{what} {q} ms [{LABELS[mode]}]",
                    _get(light, mode, "done_ms", q),
                    _get(light, "baseline", "done_ms", q),
                )
            )
    if _get(light, "job_sse", "audio_ms", "p50") is not None:
        for q in ("p50", "p99"):
            rows.append(
                (
                    f"  submit->audio in hand {q} ms [job SSE + GET audio]",
                    _get(light, "job_sse", "audio_ms", q),
                    _get(light, "baseline", "done_ms", q),
                )
            )
    fast_ms = results.get("config", {}).get("fast_poll_ms")
    if "baseline_fast_poll" in light and "ws" in light:
        for q in ("p50", "p99"):
            rows.append(
                (
                    f"  submit->succeeded {q} ms [WebSocket] vs baseline polling {fast_ms} ms",
                    _get(light, "ws", "done_ms", q),
                    _get(light, "baseline_fast_poll", "done_ms", q),
                )
            )
    for q in ("p50", "p99"):
        rows.append(
            (
                f"  submit answered {q} ms [POST /v1/tts/jobs]",
                _get(light, "job_sse", "submit_ms", q),
                _get(light, "baseline", "submit_ms", q),
            )
        )
    return rows


def _load_rows(load: dict[str, Any]) -> list[Row]:
    """A closed loop of users: throughput, latencies and CPU per job against the baseline's."""
    rows: list[Row] = [("THROUGHPUT (closed loop)", None, None)]
    for mode in load:
        if mode == "baseline":
            continue
        label = LABELS[mode]
        rows.append(
            (
                f"  jobs/s [{label}]",
                _get(load, mode, "jobs_per_s"),
                _get(load, "baseline", "jobs_per_s"),
            )
        )
        for metric, title in (("submit_ms", "submit answered"), ("done_ms", "submit->done")):
            for q in ("p50", "p99"):
                rows.append(
                    (
                        f"  {title} {q} ms under load [{label}]",
                        _get(load, mode, metric, q),
                        _get(load, "baseline", metric, q),
                    )
                )
        rows.append(
            (
                f"  server CPU ms per job [{label}]",
                _get(load, mode, "cpu_ms_per_job", "server_total"),
                _get(load, "baseline", "cpu_ms_per_job", "server_total"),
            )
        )
        rows.append(
            (
                f"  client CPU ms per job [{label}]",
                _get(load, mode, "cpu_ms_per_job", "client"),
                _get(load, "baseline", "cpu_ms_per_job", "client"),
            )
        )
    return rows


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if abs(value) < 1000 else f"{value:.0f}"


def render(results: dict[str, Any], poll_ms: int) -> str:
    rows = table_rows(results, poll_ms)
    width = max(len(r[0]) for r in rows)
    lines = [f"{'metric':<{width}}  {'ours':>9}  {'baseline':>9}  {'ratio':>6}"]
    lines.append("-" * len(lines[0]))
    for title, ours, base in rows:
        if ours is None and base is None:
            lines.append(title)
            continue
        ratio = f"{ours / base:.2f}" if ours is not None and base else "-"
        lines.append(f"{title:<{width}}  {_fmt(ours):>9}  {_fmt(base):>9}  {ratio:>6}")
    lines.append("ratio = ours / baseline: below 1 is better for times and CPU, above 1 for jobs/s")
    light_stages = results["light"].get("job_sse", {}).get("stages_ms")
    if light_stages:
        parts = ", ".join(f"{k} {light_stages[k]['p50']:.1f}" for k in STAGES)
        lines.append(f"ours, where a light-load job's time goes (p50 ms): {parts}")
    for mode, summary in results["load"].items():
        cpu = summary.get("cpu_ms_per_job", {})
        parts = ", ".join(f"{k} {v:.1f}" for k, v in cpu.items())
        busy = summary.get("cpu_busy_cores", 0.0)
        polls = summary.get("polls_per_job")
        extra = f"; {polls:.1f} query requests per job" if polls else ""
        lines.append(f"CPU ms per job under load [{mode}]: {parts}; busy cores {busy:.2f}{extra}")
        stages = summary.get("stages_ms")
        if stages:
            parts = ", ".join(f"{k} {stages[k]['p50']:.1f}" for k in STAGES)
            lines.append(f"  stages p50 ms [{mode}]: {parts}")
    return "\n".join(lines)
