"""Closed-loop client runs against a started stack, and their summaries (latency percentiles,
jobs/s, CPU per job) as written to bench/results/pipeline.json."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

from bench.lib.clients import Client, Sample, text_for
from bench.lib.stack import Stack
from bench.lib.stats import BenchError, stats

STAGES = ("accept", "queue", "synth", "push")


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
