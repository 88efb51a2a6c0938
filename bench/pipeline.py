"""Whole-pipeline benchmark, espeak engine: latency and jobs/s of ours next to the baseline design.

`python -m bench.pipeline`, `--help` for the knobs; bench/results/pipeline.json (not in the suite).
The stack is started by bench/lib/stack.py, runs and summaries in bench/lib/runs.py, the table in
bench/pipeline_report.py; this module holds the phases and the command line.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench.lib import cli, harness, report
from bench.lib.clients import (
    Client,
    ClientEventsClient,
    JobSSEClient,
    PollingClient,
    WebSocketClient,
)
from bench.lib.runs import Run, run_clients, summarize
from bench.lib.stack import Stack, start_systems, wait_ready
from bench.pipeline_report import LABELS, render
from testing.procs import bench_run


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


# ------------------------------------------------------------------------------------------ main


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = cli.parser("bench.pipeline", __doc__, output="pipeline", logs=True, log_level=True,
                       baseline=True)  # fmt: skip
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
    p.add_argument(
        "--profile",
        metavar="DIR",
        help="run our web and workers under cProfile, DIR/<process>.prof (slows them down)",
    )
    args = p.parse_args(argv)
    unknown = set(args.load_modes) - set(LABELS)
    if unknown or not args.load_modes:
        p.error(f"--load-modes: choose among {', '.join(LABELS)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    load_before = os.getloadavg()

    def run() -> int:
        with bench_run("chattts-bench-", args.keep_logs) as (procs, tmp):
            stack = start_systems(args, tmp, procs)
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
        report.write_json(args.output, results)
        print()
        print(render(results, args.poll_ms))
        cores, loads = os.cpu_count(), ", ".join(f"{x:.1f}" for x in load_before)
        print(f"{cores} cores shared by every process and this client; load before: {loads}")
        print(f"written to {args.output}")
        return 0

    return harness.guarded("pipeline", run)


if __name__ == "__main__":
    sys.exit(main())
