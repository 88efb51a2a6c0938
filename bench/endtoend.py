"""Measurement 4 of the suite: jobs/s end to end with the espeak engine, 1 and 2 workers, ours
against the baseline with as many of its own workers, the same texts, the same closed-loop load.

Each of `--users` simulated users runs jobs one after the other until `--jobs` are done: ours
keeps a `/v1/events` SSE stream open and waits for each job's succeeded event; the baseline's user
submits and polls `/tts/query/<id>` every `--poll-ms`. A job counts when the client knows it is
done (the baseline's answer carries the audio). Any failed request fails the measurement.

    python -m bench.endtoend [--quick] [--output PATH] [--skip-baseline] [--workers 1,2]
    python -m bench.endtoend --ours-url URL [--baseline-url URL]   # systems already running
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.lib import cli, harness
from bench.lib.clients import Client, ClientEventsClient, PollingClient
from bench.lib.report import Row
from bench.lib.runs import run_clients, summarize
from bench.lib.stack import Stack, wait_ready
from bench.lib.stats import BenchError
from testing.procs import Processes

SECTION = "4. jobs/s end to end"


async def closed_loop(
    stack: Stack, system: str, jobs: int, users: int, first_text: int, poll_s: float
) -> dict[str, Any]:
    """One closed-loop run against `system` ("ours" or "baseline"); raises on any failed job."""
    if system == "ours":
        url = stack.ours_url
        procs = stack.ours_procs

        def factory() -> Client:
            return ClientEventsClient(url)
    else:
        assert stack.baseline_url is not None
        base_url = stack.baseline_url
        procs = stack.baseline_procs

        def factory() -> Client:
            return PollingClient(base_url, poll_s, "baseline")

    run = await run_clients(stack, system, factory, jobs, users, itertools.count(first_text))
    if run.errors:
        raise BenchError(
            f"{system}: {len(run.errors)} of {jobs} jobs failed, the first: {run.errors[0]}"
        )
    if len(run.samples) != jobs:
        raise BenchError(f"{system}: {len(run.samples)} of {jobs} jobs reported")
    return summarize(run, procs)


async def one_stack(
    stack: Stack, args: argparse.Namespace, jobs: int, users: int, warmup: int
) -> dict[str, Any]:
    poll_s = args.poll_ms / 1000
    out: dict[str, Any] = {}
    systems = ["ours"] + (["baseline"] if stack.baseline_url else [])
    for system in systems:
        await closed_loop(stack, system, warmup, min(users, warmup), 0, poll_s)
    for system in systems:
        # Texts 1000.. for both: the same texts in the same order (ours runs with cache off).
        print(f"  {system}: {jobs} jobs, {users} users ...", flush=True)
        out[system] = await closed_loop(stack, system, jobs, users, 1000, poll_s)
    return out


def rows(raw: dict[str, Any]) -> list[Row]:
    out = []
    for workers, result in raw["runs"].items():
        base = result.get("baseline")
        each = "as running" if workers == "running" else f"{workers} worker(s) each"
        out.append(
            Row(
                SECTION,
                f"jobs/s, espeak, {each}, {raw['config']['users']} users "
                f"(ours: SSE; baseline: polls every {raw['config']['poll_ms']} ms)",
                result["ours"]["jobs_per_s"],
                "jobs/s",
                None if base is None else base["jobs_per_s"],
            )
        )
    return out


async def measure(args: argparse.Namespace) -> tuple[list[Row], dict[str, Any]]:
    jobs = args.jobs or (40 if args.quick else 600)
    users = args.users or (8 if args.quick else 32)
    warmup = 4 if args.quick else 16
    raw: dict[str, Any] = {
        "config": {"jobs": jobs, "users": users, "poll_ms": args.poll_ms, "engine": "espeak"},
        "runs": {},
    }
    if args.ours_url:  # systems already running: measure them as they are
        tmp = Path(tempfile.mkdtemp(prefix="chattts-bench-"))
        stack = Stack(Processes(tmp), "", args.ours_url, args.baseline_url, workers=0)
        raw["runs"]["running"] = await one_stack(stack, args, jobs, users, warmup)
        return rows(raw), raw
    for workers in args.workers:
        print(f"end to end: {workers} worker(s) each ...", flush=True)
        with harness.systems(args, workers) as stack:
            await wait_ready(stack)
            raw["runs"][str(workers)] = await one_stack(stack, args, jobs, users, warmup)
    return rows(raw), raw


def main(argv: list[str] | None = None) -> int:
    p = cli.parser(
        "bench.endtoend", __doc__, quick="fewer jobs (tests, CI)", output="endtoend", logs=True,
        log_level=True, baseline=True,
    )  # fmt: skip
    p.add_argument(
        "--workers",
        default=[1, 2],
        type=lambda s: [int(w) for w in s.split(",")],
        help="worker counts, each a fresh start of both systems (1,2)",
    )
    p.add_argument("--jobs", type=int, default=0, help="jobs per run (600; --quick 40)")
    p.add_argument("--users", type=int, default=0, help="concurrent users (32; --quick 8)")
    p.add_argument("--poll-ms", type=int, default=50, help="the baseline's poll interval (50)")
    p.add_argument("--ours-url", help="measure ours running there instead of starting it")
    p.add_argument("--baseline-url", help="with --ours-url: the baseline running there")
    return harness.main("endtoend", p.parse_args(argv), measure)


if __name__ == "__main__":
    sys.exit(main())
