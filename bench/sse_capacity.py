"""SSE capacity of one web process, the issue's measurement 5: concurrent `/v1/events` streams
held, resident memory per stream, events per second fanned out to them.

`python -m bench.sse_capacity [--connections 5000] [--events N] [--output PATH]`; `--quick` for a
smoke run of seconds. Each stream is a browser tab of its own client (its own `tts_client`
cookie, `--share K`: K tabs per client), as a real deployment sees them. Client processes
(bench/lib/sse_clients.py) open them; once the process's own gauge `chattts_sse_connections` counts
all of them, its RSS (VmRSS) is compared with the RSS before them. Then every client gets
`--events` jobs enqueued through the queue's own Lua script (as any submit does); each job's
`queued` event must reach every stream of its client, exactly once, else the bench fails.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from bench.lib import cli, harness
from bench.lib.cli import REPO_ROOT
from bench.lib.report import Row
from bench.lib.sse_clients import client_of
from bench.lib.stack import raise_nofile, rss_kb, start_ours, start_redis
from bench.lib.stats import BenchError
from core.infra.settings import Settings
from core.queue.job import SynthesisRequest
from core.queue.store import Queue
from testing.procs import Processes, bench_run

SECTION = "5. SSE capacity"
NO_LIMIT = 1_000_000_000
PUBLISH_CONCURRENCY = 128
GAUGE_TIMEOUT_S = 60.0
SETTLE_S = 1.0
_GAUGE = re.compile(r"^chattts_sse_connections (\S+)$", re.M)


def gauge(url: str) -> int:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        match = _GAUGE.search(response.read().decode())
    return int(float(match[1])) if match else 0


async def wait_gauge(url: str, procs: Processes, wanted: int) -> int:
    deadline = time.monotonic() + GAUGE_TIMEOUT_S
    while (held := await asyncio.to_thread(gauge, url)) != wanted:
        procs.check_alive()
        if time.monotonic() > deadline:
            raise BenchError(f"the web process holds {held} SSE streams, not {wanted}")
        await asyncio.sleep(0.2)
    return held


class Clients:
    """The client processes and their JSON-line conversation."""

    def __init__(self) -> None:
        self.children: list[asyncio.subprocess.Process] = []

    async def start(self, url: str, connections: int, processes: int, share: int) -> None:
        host, port = url.removeprefix("http://").split(":")
        per = -(-connections // processes)
        per = -(-per // share) * share  # a client's tabs stay in one process
        for first in range(0, connections, per):
            count = min(per, connections - first)
            self.children.append(
                await asyncio.create_subprocess_exec(
                    *[sys.executable, "-m", "bench.lib.sse_clients", host, port],
                    *[str(first), str(count), str(share)],
                    cwd=REPO_ROOT,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                )
            )

    async def tell(self, obj: object) -> None:
        for child in self.children:
            assert child.stdin is not None
            child.stdin.write((json.dumps(obj) + "\n").encode())
            await child.stdin.drain()

    async def hear(self, key: str, timeout: float) -> list[dict[str, Any]]:
        async def one(child: asyncio.subprocess.Process) -> dict[str, Any]:
            assert child.stdout is not None
            line = await child.stdout.readline()
            if not line:
                raise BenchError(f"an SSE client process exited ({await child.wait()})")
            said: dict[str, Any] = json.loads(line)
            if key not in said:
                raise BenchError(f"an SSE client process failed: {said}")
            return said

        async with asyncio.timeout(timeout):
            return list(await asyncio.gather(*(one(c) for c in self.children)))

    async def close(self) -> None:
        for child in self.children:
            if child.stdin is not None and not child.stdin.is_closing():
                child.stdin.close()
        for child in self.children:
            try:
                async with asyncio.timeout(30):
                    await child.wait()
            except TimeoutError:
                child.kill()
                await child.wait()


async def publish(redis_url: str, groups: int, rounds: int) -> float:
    """One job per client per round (its `queued` event goes to every tab); returns when the
    last enqueue was answered (wall clock)."""
    redis = Redis.from_url(redis_url, max_connections=PUBLISH_CONCURRENCY)
    settings = Settings.of(
        redis_url=redis_url,
        max_backlog=NO_LIMIT,
        max_active_per_client=NO_LIMIT,
        max_backlog_per_owner=0,
    )
    queue = Queue(redis, settings)
    request = SynthesisRequest(text="你好。", voice="zh_female")
    gate = asyncio.Semaphore(PUBLISH_CONCURRENCY)

    async def one(group: int) -> None:
        async with gate:
            await queue.enqueue(request, client_of(group))

    try:
        for _ in range(rounds):
            await asyncio.gather(*(one(g) for g in range(groups)))
    finally:
        await redis.aclose()
    return time.time()


async def measure(args: argparse.Namespace, procs: Processes, tmp: Path) -> dict[str, Any]:
    n, share = args.connections, args.share
    redis_url = start_redis(procs, tmp)
    limits: dict[str, Any] = {
        "max_backlog": NO_LIMIT,
        "max_active_per_client": NO_LIMIT,
        "max_backlog_per_owner": 0,
    }
    ours = start_ours(procs, redis_url, tmp, **(limits | dict(args.setting)))
    url, web = ours.url, ours.web
    await asyncio.to_thread(gauge, url)  # one request served: lazily built parts exist
    await asyncio.sleep(SETTLE_S)
    rss_before = rss_kb(web.pid)
    clients = Clients()
    try:
        t0 = time.perf_counter()
        await clients.start(url, n, args.processes, share)
        await clients.hear("ready", timeout=args.timeout)
        held = await wait_gauge(url, procs, n)
        connect_s = time.perf_counter() - t0
        await asyncio.sleep(SETTLE_S)
        rss_held = rss_kb(web.pid)
        print(f"{held} streams held (opened in {connect_s:.1f} s); RSS {rss_before} kB -> "
              f"{rss_held} kB", flush=True)  # fmt: skip
        groups = -(-n // share)
        await clients.tell({"expect": args.events, "timeout": args.timeout})
        cpu0 = web.cpu_s()
        started = time.time()
        published = await publish(redis_url, groups, args.events)
        reports = await clients.hear("done", timeout=args.timeout + 30)
        cpu = web.cpu_s() - cpu0
        rss_after = rss_kb(web.pid)
        procs.check_alive()
    finally:
        await clients.close()
    return check(n, args.events, reports) | {
        "connections": n,
        "held": held,
        "share": share,
        "events_per_stream": args.events,
        "jobs_published": groups * args.events,
        "connect_s": connect_s,
        "rss_kb": {"before": rss_before, "held": rss_held, "after_events": rss_after},
        "kb_per_connection": (rss_held - rss_before) / n,
        "publish_s": published - started,
        "fanout_s": max(r["last_at"] for r in reports) - started,
        "web_cpu_s_fanout": cpu,
    }


def check(n: int, events: int, reports: list[dict[str, Any]]) -> dict[str, Any]:
    streams = sum(r["streams"] for r in reports)
    lo = min(r["min_events"] for r in reports)
    hi = max(r["max_events"] for r in reports)
    errors = [e for r in reports for e in r["errors"]]
    if streams != n or lo != events or hi != events or errors:
        raise BenchError(
            f"not every stream got every event exactly once: {streams} streams, "
            f"{lo} to {hi} events each (expected {events}); errors: {errors[:3]}"
        )
    return {"delivered": sum(r["events"] for r in reports)}


def rows(raw: dict[str, Any]) -> list[Row]:
    n = raw["connections"]
    kb = raw["kb_per_connection"]
    rate = raw["delivered"] / raw["fanout_s"]
    # The rate is bounded by the whole machine (publisher, Redis, clients share its cores); the
    # web process's own CPU per delivered event is its capacity: 1e6 / cpu_us events/s per core.
    cpu_us = 1e6 * raw["web_cpu_s_fanout"] / raw["delivered"]
    return [
        Row(SECTION, "SSE streams held by one web process", raw["held"], "connections",
            target=">= 5,000", met=raw["held"] >= 5000),
        Row(SECTION, f"RSS per SSE stream ({n} streams)", kb, "KB",
            target="< 50 KB", met=kb < 50),
        Row(SECTION, f"events/s fanned out to {n} streams", rate, "events/s"),
        Row(SECTION, "web CPU per event delivered", cpu_us, "µs"),
    ]  # fmt: skip


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = cli.parser("bench.sse_capacity", __doc__, quick="seconds", output="sse_capacity", logs=True)
    p.add_argument("--connections", type=int, help="SSE streams (5000; --quick: 200)")
    p.add_argument("--events", type=int, help="events each stream must get (10; --quick: 3)")
    p.add_argument("--share", type=int, default=1, help="streams (tabs) per client id (1)")
    p.add_argument("--processes", type=int, default=2, help="client processes (2)")
    p.add_argument("--timeout", type=float, default=120.0, help="per phase, seconds (120)")
    cli.add_setting_arg(p)
    args = p.parse_args(argv)
    args.connections = args.connections or (200 if args.quick else 5000)
    args.events = args.events or (3 if args.quick else 10)
    if args.connections < 1 or args.share < 1 or args.processes < 1 or args.events < 1:
        p.error("--connections, --events, --share and --processes must be positive")
    return args


async def bench(args: argparse.Namespace) -> tuple[list[Row], dict[str, Any]]:
    with bench_run("chattts-bench-sse-", args.keep_logs) as (procs, tmp):
        # The web process and the client processes inherit the limit (one fd per stream).
        raise_nofile(args.connections + 4096)
        raw = await measure(args, procs, tmp)
    raw["config"] = {"cpu_count": os.cpu_count(), "client_processes": args.processes,
                     "python": platform.python_version()}  # fmt: skip
    return rows(raw), raw


def main(argv: Sequence[str] | None = None) -> int:
    return harness.main("sse_capacity", parse_args(argv), bench)


if __name__ == "__main__":
    sys.exit(main())
