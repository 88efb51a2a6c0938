"""Every benchmark's lifetime: the systems it starts, stopped on the way out (even on an error or
Ctrl-C), and its figures printed and written; a failed measurement exits 1 with no figures."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import time
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import aiohttp

from bench.lib import report
from bench.lib.cli import RESULTS_DIR
from bench.lib.report import Row
from bench.lib.stack import Stack, start_systems
from bench.lib.stats import BenchError
from testing.procs import Processes, bench_run, interrupt

FAILURES = (RuntimeError, BenchError, TimeoutError, OSError, aiohttp.ClientError)

Measure = Callable[[argparse.Namespace], Coroutine[Any, Any, tuple[list[Row], dict[str, Any]]]]


@contextlib.contextmanager
def systems(args: argparse.Namespace, workers: int) -> Iterator[Stack]:
    """One embedded Redis with ours and (unless --skip-baseline) the baseline, `workers` workers
    each; every process is stopped on the way out, even on an error or Ctrl-C."""
    with bench_run("chattts-bench-", args.keep_logs) as (procs, tmp):
        stack_args = argparse.Namespace(**{**vars(args), "workers": workers, "profile": None})
        yield start_systems(stack_args, tmp, procs)


def guarded(name: str, run: Callable[[], int]) -> int:
    """`run()`'s exit status; 130 on Ctrl-C (or SIGTERM), 1 when the measurement failed."""
    signal.signal(signal.SIGTERM, interrupt)
    try:
        return run()
    except KeyboardInterrupt:
        print("\ninterrupted: every process stopped", file=sys.stderr)
        return 130
    except FAILURES as exc:
        print(f"bench FAILED: {name}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


def main(name: str, args: argparse.Namespace, measure: Measure) -> int:
    """Run `measure`, print its rows, write them; exit 1 when anything failed (no partial rows)."""
    out = Path(args.output) if args.output else RESULTS_DIR / f"{name}.json"

    def run() -> int:
        started = time.perf_counter()
        rows, raw = asyncio.run(measure(args))
        if not rows:
            raise BenchError("no rows")
        raw["bench_s"] = time.perf_counter() - started
        raw["quick"] = bool(getattr(args, "quick", False))
        report.write(out, rows, raw)
        print(report.render(rows))
        print(f"written to {out}")
        return 0

    return guarded(name, run)


def run(
    prefix: str,
    args: argparse.Namespace,
    measure: Callable[[argparse.Namespace, Processes, Path], dict[str, Any]],
) -> int:
    """Run `measure` with its processes and folder, then print its figures (and write them to
    --output)."""
    with bench_run(prefix, args.keep_logs) as (procs, tmp):
        figures = measure(args, procs, tmp)
    report.figures(figures, args.output)
    return 0
