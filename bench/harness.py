"""What the suite's measurement modules share: their command line, the lifetime of the systems
they start, and their output file `{"rows": [Row.to_json(), ...], "raw": {...}}` (with
`"skipped": "why"` instead of rows when a measurement cannot run on this machine)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from pathlib import Path
from typing import Any

import aiohttp

from bench import baseline_env
from bench.clients import BenchError
from bench.runs import percentile
from bench.stack import REPO_ROOT, Stack, start_systems
from bench.table import Row
from testing.procs import bench_run, interrupt

RESULTS_DIR = REPO_ROOT / "bench" / "results"

Measure = Callable[[argparse.Namespace], Coroutine[Any, Any, tuple[list[Row], dict[str, Any]]]]


def parser(prog: str, description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"python -m {prog}", description=description)
    p.add_argument("--quick", action="store_true", help="a few seconds: fewer jobs (tests, CI)")
    p.add_argument("--output", help="JSON file for the rows (default bench/results/<name>.json)")
    p.add_argument("--skip-baseline", action="store_true", help="measure ours alone")
    p.add_argument("--baseline-dir", help="another copy of the baseline (bench/baseline)")
    p.add_argument("--baseline-venv", default=str(baseline_env.DEFAULT_VENV))
    p.add_argument("--log-level", default="WARNING", help="our processes' log level (WARNING)")
    p.add_argument("--keep-logs", action="store_true", help="keep the processes' logs")
    return p


def ms_stats(values: Sequence[float]) -> dict[str, float]:
    """p50/p90/p99/mean/min/max of seconds, in ms."""
    if not values:
        raise BenchError("no samples: the measurement measured nothing")
    ms = [v * 1000 for v in values]
    return {
        "n": len(ms),
        "p50": percentile(ms, 50),
        "p90": percentile(ms, 90),
        "p99": percentile(ms, 99),
        "mean": sum(ms) / len(ms),
        "min": min(ms),
        "max": max(ms),
    }


@contextlib.contextmanager
def systems(args: argparse.Namespace, workers: int) -> Iterator[Stack]:
    """One embedded Redis with ours and (unless --skip-baseline) the baseline, `workers` workers
    each; every process is stopped on the way out, even on an error or Ctrl-C."""
    with bench_run("chattts-bench-", args.keep_logs) as (procs, tmp):
        stack_args = argparse.Namespace(**{**vars(args), "workers": workers, "profile": None})
        yield start_systems(stack_args, tmp, procs)


def write(path: Path, rows: Sequence[Row], raw: dict[str, Any], skipped: str | None = None) -> None:
    out: dict[str, Any] = {"rows": [r.to_json() for r in rows], "raw": raw}
    if skipped is not None:
        out["skipped"] = skipped
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")


def main(name: str, args: argparse.Namespace, measure: Measure) -> int:
    """Run `measure`, print its rows, write them; exit 1 when anything failed (no partial rows)."""
    signal.signal(signal.SIGTERM, interrupt)
    out = Path(args.output) if args.output else RESULTS_DIR / f"{name}.json"
    started = time.perf_counter()
    try:
        rows, raw = asyncio.run(measure(args))
    except KeyboardInterrupt:
        print("\ninterrupted: every process stopped", file=sys.stderr)
        return 130
    except (RuntimeError, BenchError, TimeoutError, OSError, aiohttp.ClientError) as exc:
        print(f"{name} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    if not rows:
        print(f"{name} failed: no rows", file=sys.stderr)
        return 1
    raw["bench_s"] = time.perf_counter() - started
    raw["quick"] = bool(args.quick)
    write(out, rows, raw)
    for row in rows:
        base = "-" if row.baseline is None else f"{row.baseline:.2f}"
        print(f"{row.section} | {row.metric} | {row.ours:.2f} {row.unit} | baseline {base}")
    print(f"written to {out}")
    return 0
