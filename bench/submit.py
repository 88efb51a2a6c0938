"""Submit throughput and latency of one web process: ours (`POST /v1/tts/jobs`, `POST
/tts/submit`) against the baseline's `POST /tts/submit` (uvicorn, one process), the issue's
measurement 1.

`python -m bench.submit [--connections 64,256] [--duration S] [--repeats N] [--output PATH]`;
`--quick` for a smoke run of seconds. Redis (AOF everysec, as in production) is shared by both
systems, each in its own database, and flushed before every run; no worker consumes, so every
request is a real enqueue. The load generator (bench/lib/loadgen.py: wrk, else aiohttp processes)
runs in processes of its own. Every system is warmed up first; each figure is the median of the
repeats, and runs of the systems alternate so that a drift of the machine hits all of them. Any
answer other than 2xx fails the bench.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from bench.lib import cli, harness, loadgen
from bench.lib.identities import cookie_header
from bench.lib.loadgen import Load
from bench.lib.report import Row
from bench.lib.stack import start_baseline, start_ours, start_redis
from testing.procs import Processes, bench_run

SECTION = "1. submit throughput"
BODY = {"text": "今天下午我们去公园散步。", "voice": "zh_female"}
# One script client (API keys are off: the bearer token names the client).
HEADERS = {"Content-Type": "application/json", **cookie_header("bench-submit-client")}
# Nothing consumes during the bench: neither cap may refuse a submit (a refusal fails the bench),
# and no storage quota either (one client's tens of thousands of jobs would pass its 4 GB; each
# job is still charged to its accounts, as every submission is).
NO_LIMIT = 1_000_000_000
NO_QUOTA = {"storage_per_client_bytes": 0, "storage_per_address_bytes": 0}
TARGET_RPS = ">= 1x baseline"
TARGET_P99 = "<= 1x baseline"


@dataclass(frozen=True)
class System:
    key: str  # in the JSON
    label: str  # in the table
    path: str
    baseline: bool = False


SYSTEMS = (
    System("ours_jobs", "ours POST /v1/tts/jobs", "/v1/tts/jobs"),
    System("ours_legacy", "ours POST /tts/submit", "/tts/submit"),
    System("baseline", "baseline POST /tts/submit", "/tts/submit", baseline=True),
)


def measure(args: argparse.Namespace, procs: Processes, tmp: Path) -> dict[str, Any]:
    redis_url = start_redis(procs, tmp)
    limits: dict[str, Any] = {
        "max_backlog": NO_LIMIT,
        "max_active_per_client": NO_LIMIT,
        **NO_QUOTA,
    }
    limits["max_backlog_per_owner"] = 0
    service = start_ours(procs, redis_url, tmp, **(limits | dict(args.setting)))
    ours, web = service.url, service.web
    urls = {s.key: ours + s.path for s in SYSTEMS if not s.baseline}
    if not args.skip_baseline:
        urls["baseline"] = start_baseline(procs, redis_url, args) + "/tts/submit"
    systems = [s for s in SYSTEMS if s.key in urls]
    store = redis.Redis.from_url(redis_url)
    body = json.dumps(BODY, ensure_ascii=False).encode()

    def one(system: System, connections: int, seconds: float) -> Load:
        store.flushall()
        url = urls[system.key]
        # Ours must answer every request 2xx; the baseline's 503s are its own figure.
        load = loadgen.run(url, body, HEADERS, connections, seconds, args.tool, not system.baseline)
        procs.check_alive()
        return load

    try:
        print(f"warming up ({args.warmup:g} s each) ...", flush=True)
        for system in systems:
            one(system, max(args.connections), args.warmup)
        runs: dict[str, dict[int, list[Load]]] = {s.key: {} for s in systems}
        for repeat in range(args.repeats):
            for connections in args.connections:
                for system in systems:
                    load = one(system, connections, args.duration)
                    runs[system.key].setdefault(connections, []).append(load)
                    print(
                        f"  run {repeat + 1}/{args.repeats} {system.label:28} c={connections:<4}"
                        f" {load.rps:8.0f} req/s  p50 {load.p50_ms:6.2f} ms"
                        f"  p99 {load.p99_ms:6.2f} ms"
                        + (f"  ({load.failed_pct:.1f}% non-2xx)" if load.failed else ""),
                        flush=True,
                    )
    finally:
        store.close()
    return {
        "tool": runs[systems[0].key][args.connections[0]][0].tool,
        "web_pid": web.pid,
        "runs": {
            key: {str(c): [load.to_json() for load in loads] for c, loads in per.items()}
            for key, per in runs.items()
        },
        "median": {
            key: {str(c): medians(loads) for c, loads in per.items()} for key, per in runs.items()
        },
    }


def medians(loads: Sequence[Load]) -> dict[str, float]:
    return {
        "rps": statistics.median(x.rps for x in loads),
        "failed_pct": statistics.median(x.failed_pct for x in loads),
        "p50_ms": statistics.median(x.p50_ms for x in loads),
        "p99_ms": statistics.median(x.p99_ms for x in loads),
    }


def rows(raw: dict[str, Any], connections: Sequence[int], repeats: int) -> list[Row]:
    median = raw["median"]
    base = median.get("baseline")
    out: list[Row] = []
    for c in connections:
        b = base[str(c)] if base else None
        for system in SYSTEMS:
            if system.baseline or system.key not in median:
                continue
            m = median[system.key][str(c)]
            b_rps, b_p50, b_p99 = (b["rps"], b["p50_ms"], b["p99_ms"]) if b else (None,) * 3
            what = f"{c} connections, {system.label.removeprefix('ours ')}"
            rps_met = p99_met = None
            if b_rps is not None and b_p99 is not None:
                rps_met = m["rps"] >= b_rps
                p99_met = m["p99_ms"] <= b_p99
            out += [
                Row(SECTION, f"requests/s (2xx), {what}", m["rps"], "req/s",
                    b_rps, TARGET_RPS, rps_met, repeats),
                Row(SECTION, f"p50 latency, {what}", m["p50_ms"], "ms", b_p50, None, None, repeats),
                Row(SECTION, f"p99 latency, {what}", m["p99_ms"], "ms",
                    b_p99, TARGET_P99, p99_met, repeats),
            ]  # fmt: skip
        if b is not None:
            out.append(
                Row(SECTION, f"non-2xx answers, {c} connections, POST /tts/submit", 0.0, "%",
                    b["failed_pct"], None, None, repeats)
            )  # fmt: skip
    return out


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = cli.parser(
        "bench.submit", __doc__, quick="seconds", output="submit", repeats="3; --quick: 1",
        logs=True, baseline=True,
    )  # fmt: skip
    p.add_argument(
        "--connections",
        type=lambda s: [int(x) for x in s.split(",") if x.strip()],
        help="concurrent keep-alive connections, comma-separated (64,256; --quick: 16)",
    )
    p.add_argument("--duration", type=float, help="seconds per run (10; --quick: 2)")
    p.add_argument("--warmup", type=float, help="warm-up seconds per system (5; --quick: 1)")
    p.add_argument("--tool", choices=["auto", "wrk", "aiohttp"], default="auto",
                   help="load generator (auto: wrk when installed)")  # fmt: skip
    cli.add_setting_arg(p)
    args = p.parse_args(argv)
    quick = args.quick
    args.connections = args.connections or ([16] if quick else [64, 256])
    args.duration = args.duration or (2.0 if quick else 10.0)
    args.repeats = args.repeats or (1 if quick else 3)
    args.warmup = args.warmup if args.warmup is not None else (1.0 if quick else 5.0)
    return args


async def bench(args: argparse.Namespace) -> tuple[list[Row], dict[str, Any]]:
    with bench_run("chattts-bench-submit-", args.keep_logs) as (procs, tmp):
        load_before = os.getloadavg()
        raw = measure(args, procs, tmp)
    raw["config"] = {
        "connections": args.connections,
        "duration_s": args.duration,
        "repeats": args.repeats,
        "warmup_s": args.warmup,
        "body": BODY,
        "server_processes_each": 1,
        "cpu_count": os.cpu_count(),
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
        "python": platform.python_version(),
    }
    print(f"load generator: {raw['tool']}")
    return rows(raw, args.connections, args.repeats), raw


def main(argv: Sequence[str] | None = None) -> int:
    return harness.main("submit", parse_args(argv), bench)


if __name__ == "__main__":
    sys.exit(main())
