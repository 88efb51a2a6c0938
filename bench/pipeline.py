"""Whole-pipeline benchmark, espeak engine: latency and jobs/s of ours next to the baseline design.

`python -m bench.pipeline` (or `make bench`), `--help` for the knobs; bench/results/pipeline.json.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import aiohttp
import redis.asyncio as aioredis

from workers.embedded_redis import EmbeddedRedis, free_port
from workers.settings import Settings

from . import baseline_env
from .clients import (
    BenchError,
    Client,
    ClientEventsClient,
    JobSSEClient,
    PollingClient,
    Sample,
    WebSocketClient,
    text_for,
)
from .procs import Processes

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS = REPO_ROOT / "bench" / "results" / "pipeline.json"
READY_TIMEOUT_S = 90.0
STAGES = ("accept", "queue", "synth", "push")


# ---------------------------------------------------------------------------------------- setup


@dataclass
class Stack:
    procs: Processes
    redis_url: str
    ours_url: str
    baseline_url: str | None
    workers: int
    baseline_redis_url: str | None = None
    ours_procs: list[str] = field(default_factory=list)
    baseline_procs: list[str] = field(default_factory=list)


def start_stack(args: argparse.Namespace, tmp: Path, procs: Processes) -> Stack:
    """One embedded Redis; ours (web + N espeak workers); the baseline (API + N workers)."""
    redis_server = EmbeddedRedis(tmp / "redis")
    redis_server.data_dir.mkdir(parents=True, exist_ok=True)
    redis_server.process = procs.start("redis", redis_server.command(), tier=0).popen
    redis_server.wait_ready()

    ours_port = free_port()
    settings = Settings(
        redis_url=redis_server.url,
        engine="espeak",
        host="127.0.0.1",
        port=ours_port,
        # The bench's users keep up to `concurrency` jobs each in flight; never refuse them.
        max_active_per_client=1_000_000,
        max_backlog=1_000_000,
        data_dir=str(tmp / "data"),
        # WARNING: no per-request access log line, as the baseline runs with --no-access-log.
        log_level=args.log_level,
        worker_name="bench-web",
    )
    env = {**os.environ, **settings.to_env()}

    def cli(name: str) -> list[str]:
        if not args.profile:
            return [sys.executable, "-m", "web.cli"]
        # cProfile of the process's main thread (its event loop), written when it exits.
        out = Path(args.profile) / f"{name}.prof"
        out.parent.mkdir(parents=True, exist_ok=True)
        return [sys.executable, "-m", "cProfile", "-o", str(out), "-m", "web.cli"]

    stack = Stack(procs, redis_server.url, f"http://127.0.0.1:{ours_port}", None, args.workers)
    procs.start("ours-web", [*cli("ours-web"), "web"], env, cwd=REPO_ROOT)
    stack.ours_procs.append("ours-web")
    for i in range(args.workers):
        name = f"ours-worker-{i + 1}"
        worker_env = {**env, "CHATTTS_WORKER_NAME": f"bench-worker-{i + 1}"}
        procs.start(name, [*cli(name), "worker"], worker_env, cwd=REPO_ROOT)
        stack.ours_procs.append(name)

    if not args.skip_baseline:
        baseline_dir = baseline_env.find_baseline(args.baseline_dir)
        venv = baseline_env.ensure_venv(Path(args.baseline_venv), baseline_dir)
        port = free_port()
        # Same server, its own database: its keys (tts:queue, tts:result:*) never meet ours.
        stack.baseline_redis_url = redis_server.url.rsplit("/", 1)[0] + "/1"
        benv = {**os.environ, "REDIS_URL": stack.baseline_redis_url}
        api = baseline_env.api_command(venv, baseline_dir, port)
        procs.start("baseline-api", api, benv, cwd=baseline_dir)
        stack.baseline_procs.append("baseline-api")
        for i in range(args.workers):
            name = f"baseline-worker-{i + 1}"
            procs.start(
                name, baseline_env.worker_command(venv, baseline_dir), benv, cwd=baseline_dir
            )
            stack.baseline_procs.append(name)
        stack.baseline_url = f"http://127.0.0.1:{port}"
    return stack


async def wait_ready(stack: Stack) -> None:
    """Ours: /readyz with every worker alive. Baseline: its API answers and its worker beats."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    ours_ok = False
    baseline_ok = stack.baseline_url is None
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http:
        beat = aioredis.from_url(stack.baseline_redis_url) if stack.baseline_redis_url else None
        try:
            while not (ours_ok and baseline_ok):
                stack.procs.check_alive()
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"not ready after {READY_TIMEOUT_S:.0f}s (ours: {ours_ok}, "
                        f"baseline: {baseline_ok}); see the logs"
                    )
                try:
                    if not ours_ok:
                        async with http.get(f"{stack.ours_url}/readyz") as resp:
                            body = await resp.json()
                            ours_ok = resp.status == 200 and body.get("workers", 0) >= stack.workers
                    if not baseline_ok and beat is not None:
                        async with http.get(f"{stack.baseline_url}/tts/query/ready-probe") as resp:
                            api_ok = resp.status == 200
                        baseline_ok = api_ok and bool(await beat.exists("tts:worker:heartbeat"))
                except (aiohttp.ClientError, TimeoutError, ValueError):
                    pass
                if not (ours_ok and baseline_ok):
                    await asyncio.sleep(0.2)
        finally:
            if beat is not None:
                await beat.aclose()


# -------------------------------------------------------------------------------------- running


@dataclass
class Run:
    label: str
    samples: list[Sample]
    errors: list[str]
    wall_s: float
    cpu_s: dict[str, float]  # per process (and "client": this process) over the run
    first_text: int = 0


async def run_clients(
    stack: Stack,
    label: str,
    factory: Callable[[], Client],
    jobs: int,
    concurrency: int,
    texts: Iterator[int],
) -> Run:
    """`concurrency` users, each running jobs one after the other, `jobs` in all (closed loop)."""
    clients = [factory() for _ in range(concurrency)]
    samples: list[Sample] = []
    errors: list[str] = []
    counter = itertools.count()
    try:
        await asyncio.gather(*(c.open() for c in clients))

        async def user(client: Client) -> None:
            while next(counter) < jobs:
                try:
                    samples.append(await client.run_job(text_for(next(texts))))
                except (BenchError, TimeoutError, aiohttp.ClientError) as exc:
                    errors.append(f"{type(exc).__name__}: {exc}")

        cpu0, client0 = stack.procs.cpu(), time.process_time()
        t0 = time.perf_counter()
        await asyncio.gather(*(user(c) for c in clients))
        wall = time.perf_counter() - t0
        cpu1, client1 = stack.procs.cpu(), time.process_time()
    finally:
        await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)
    stack.procs.check_alive()
    cpu = {name: cpu1[name] - cpu0.get(name, 0.0) for name in cpu1}
    cpu["client"] = client1 - client0
    if errors:
        print(f"  ! {label}: {len(errors)} of {jobs} jobs failed, first: {errors[0]}", flush=True)
    return Run(label, samples, errors, wall, cpu)


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    pos = (len(ordered) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def stats(values: Sequence[float]) -> dict[str, float]:
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


def summarize(run: Run, procs: Sequence[str]) -> dict[str, Any]:
    ok = len(run.samples)
    out: dict[str, Any] = {
        "label": run.label,
        "jobs_ok": ok,
        "errors": len(run.errors),
        "first_errors": run.errors[:3],
        "wall_s": run.wall_s,
        "jobs_per_s": ok / run.wall_s if run.wall_s > 0 else 0.0,
        "submit_ms": stats([s.submit_ms for s in run.samples]),
        "done_ms": stats([s.done_ms for s in run.samples]),
    }
    audio = [s.audio_ms for s in run.samples if s.audio_ms is not None]
    if audio:
        out["audio_ms"] = stats(audio)
    polls = [s.polls for s in run.samples if s.polls]
    if polls:
        out["polls_per_job"] = sum(polls) / len(polls)
    staged = [s.stages for s in run.samples if s.stages]
    if staged:
        out["stages_ms"] = {k: stats([s[k] for s in staged]) for k in STAGES}
    names = [*procs, "redis", "client"]
    cpu = {n: run.cpu_s.get(n, 0.0) for n in names}
    out["cpu_ms_per_job"] = {n: 1000 * v / max(ok, 1) for n, v in cpu.items()}
    server = sum(v for n, v in cpu.items() if n != "client")
    out["cpu_ms_per_job"]["server_total"] = 1000 * server / max(ok, 1)
    out["cpu_busy_cores"] = (server + cpu["client"]) / run.wall_s if run.wall_s > 0 else 0.0
    return out


async def bench(args: argparse.Namespace, stack: Stack) -> dict[str, Any]:
    await wait_ready(stack)
    ours, base = stack.ours_url, stack.baseline_url
    poll_s = args.poll_ms / 1000
    has_base = base is not None
    # Text i is the same for both systems: each baseline run gets exactly the texts of ours' first
    # run of the same phase; ours' runs take texts further on (its worker may cache results).
    next_text = 0

    async def ours_run(label: str, factory: Callable[[], Client], jobs: int, conc: int) -> Run:
        nonlocal next_text
        start, next_text = next_text, next_text + jobs
        run = await run_clients(stack, label, factory, jobs, conc, itertools.count(start))
        run.first_text = start
        return run

    async def base_run(
        label: str, jobs: int, conc: int, first_text: int, interval_s: float = poll_s
    ) -> Run:
        assert base is not None
        factory = lambda: PollingClient(base, interval_s, label)  # noqa: E731
        return await run_clients(stack, label, factory, jobs, conc, itertools.count(first_text))

    light_modes: dict[str, Callable[[], Client]] = {
        "job_sse": lambda: JobSSEClient(ours, fetch_audio=True),
        "events": lambda: ClientEventsClient(ours),
        "ws": lambda: WebSocketClient(ours),
        "legacy_poll": lambda: PollingClient(ours, poll_s, "ours: legacy poll"),
    }
    load_modes = {name: light_modes[name] for name in args.load_modes}

    print("warming up ...", flush=True)
    for name, factory in light_modes.items():
        await ours_run(f"warm-up {name}", factory, args.warmup, 2)
    if has_base:
        await base_run("warm-up baseline", args.warmup * 2, 2, 0)

    results: dict[str, Any] = {"light": {}, "load": {}}
    print(f"light load: {args.light_jobs} sequential jobs per mode ...", flush=True)
    first: int | None = None
    for name, factory in light_modes.items():
        run = await ours_run(name, factory, args.light_jobs, 1)
        first = run.first_text if first is None else first
        results["light"][name] = summarize(run, stack.ours_procs)
    if has_base and first is not None:
        run = await base_run("baseline", args.light_jobs, 1, first)
        results["light"]["baseline"] = summarize(run, stack.baseline_procs)
        if args.fast_poll_ms:
            # Its latency floor is its poll interval: also measured with a client that polls
            # much faster (more load on its API, which this light phase does not feel).
            fast = args.fast_poll_ms / 1000
            run = await base_run("baseline fast poll", args.light_jobs, 1, first, fast)
            results["light"]["baseline_fast_poll"] = summarize(run, stack.baseline_procs)

    print(
        f"load: {args.jobs} jobs from {args.concurrency} concurrent users per mode ...", flush=True
    )
    first = None
    for name, factory in load_modes.items():
        run = await ours_run(name, factory, args.jobs, args.concurrency)
        first = run.first_text if first is None else first
        results["load"][name] = summarize(run, stack.ours_procs)
    if has_base and first is not None:
        run = await base_run("baseline", args.jobs, args.concurrency, first)
        results["load"]["baseline"] = summarize(run, stack.baseline_procs)
    return results


# -------------------------------------------------------------------------------------- report

_LABELS = {
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
    light, load = results["light"], results["load"]
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
                    f"  submit->{what} {q} ms [{_LABELS[mode]}]",
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
    rows.append(("THROUGHPUT (closed loop)", None, None))
    for mode in load:
        if mode == "baseline":
            continue
        label = _LABELS[mode]
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


# ------------------------------------------------------------------------------------------ main


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.pipeline",
        description=(
            "Submit-to-done latency and jobs/s through the whole pipeline (web, Redis, espeak "
            "worker), ours and the baseline design side by side on this machine."
        ),
    )
    p.add_argument("--light-jobs", type=int, default=100, help="sequential jobs per mode (100)")
    p.add_argument("--jobs", type=int, default=1000, help="jobs per throughput run (1000)")
    p.add_argument("--concurrency", type=int, default=32, help="concurrent users (32)")
    p.add_argument("--workers", type=int, default=1, help="worker processes, each system (1)")
    p.add_argument("--warmup", type=int, default=8, help="warm-up jobs per mode (8)")
    p.add_argument("--poll-ms", type=int, default=50, help="polling clients' interval (50)")
    p.add_argument(
        "--fast-poll-ms",
        type=int,
        default=10,
        help="light load: the baseline again with this poll interval (10; 0: skip)",
    )
    p.add_argument(
        "--load-modes",
        default="events,ws",
        type=lambda s: [m.strip() for m in s.split(",") if m.strip()],
        help="our client modes under load: events, ws, job_sse, legacy_poll (events,ws)",
    )
    p.add_argument("--skip-baseline", action="store_true", help="measure ours alone")
    p.add_argument("--baseline-dir", help="the baseline's directory (../shared/baseline)")
    p.add_argument("--baseline-venv", default=str(baseline_env.DEFAULT_VENV))
    p.add_argument("--log-level", default="WARNING", help="our processes' log level (WARNING)")
    p.add_argument("--output", default=str(RESULTS), help="JSON results file")
    p.add_argument("--keep-logs", action="store_true", help="keep the processes' logs")
    p.add_argument(
        "--profile",
        metavar="DIR",
        help="run our web and workers under cProfile, DIR/<process>.prof (slows them down)",
    )
    args = p.parse_args(argv)
    unknown = set(args.load_modes) - set(_LABELS)
    if unknown or not args.load_modes:
        p.error(f"--load-modes: choose among {', '.join(_LABELS)}")
    return args


def _interrupt(signum: int, _frame: object) -> NoReturn:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="chattts-bench-"))
    procs = Processes(tmp / "logs")
    signal.signal(signal.SIGTERM, _interrupt)
    load_before = os.getloadavg()
    ok = False
    try:
        stack = start_stack(args, tmp, procs)
        started = time.perf_counter()
        results = asyncio.run(bench(args, stack))
        results["config"] = {
            "light_jobs": args.light_jobs,
            "jobs": args.jobs,
            "concurrency": args.concurrency,
            "workers_each": args.workers,
            "warmup_per_mode": args.warmup,
            "poll_ms": args.poll_ms,
            "fast_poll_ms": args.fast_poll_ms,
            "engine": "espeak",
            "cpu_count": os.cpu_count(),
            "loadavg_before": load_before,
            "loadavg_after": os.getloadavg(),
            "bench_s": time.perf_counter() - started,
            "python": platform.python_version(),
            "note": "web, workers, Redis and this client all share the machine's cores",
        }
        out = Path(args.output)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=2) + "\n")
        print()
        print(render(results, args.poll_ms))
        cores, loads = os.cpu_count(), ", ".join(f"{x:.1f}" for x in load_before)
        print(f"{cores} cores shared by every process and this client; load before: {loads}")
        print(f"written to {out}")
        ok = True
        return 0
    except KeyboardInterrupt:
        print("\ninterrupted: stopping every process", file=sys.stderr)
        return 130
    except (RuntimeError, BenchError) as exc:
        print(f"bench failed: {exc}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not skip the cleanup
        procs.stop_all()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if ok and not args.keep_logs:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"logs in {tmp / 'logs'}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
