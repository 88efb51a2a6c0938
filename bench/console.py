"""What the operators' console costs: the time of each of its reads and the memory its tallies and
index keep, on an embedded Redis holding a day's worth of ended jobs from many clients.

    python -m bench.console [--jobs 5000] [--clients 3000] [--repeats 7]

Jobs are submitted and ended through the queue's own scripts (take, start, finish), so the usage
tallies, the index and the runs are what a live service writes. Prints each read's median
[min - max] in ms and the bytes Redis keeps for the day's tally, the index and a job's runs.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bench.lib import cli
from core.infra.embedded_redis import EmbeddedRedis
from core.infra.redis_client import connect
from core.infra.settings import Settings
from core.queue.job import SynthesisRequest
from core.queue.keys import USAGE_CLIENTS_PER_DAY
from core.queue.store import Queue, Started
from web.replies.console import queue_view


async def _fill(queue: Queue, jobs: int, clients: int) -> list[str]:
    ids = []
    for i in range(jobs):
        request = SynthesisRequest(text=f"Job {i} of client {i % clients}.", voice="en_male")
        ids.append((await queue.enqueue(request, f"client-{i % clients}")).job_id)
    ended = 0
    while ended < jobs:
        for stream, entry, job_id, client in await queue.work.take("bench", 64):
            started = await queue.work.start(job_id, entry, "bench", stream, client)
            assert isinstance(started, Started), started
            await queue.work.finish(job_id, client, started.token, "failed", "bench", stream)
            ended += 1
    return ids


async def _timed(call: Callable[[], Awaitable[Any]], repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        await call()
        out.append((time.perf_counter() - t0) * 1000)
    return out


async def measure(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as data, EmbeddedRedis(data, appendonly=False) as redis:
        settings = Settings.of(
            redis_url=redis.url,
            queue="bench",
            engine="espeak",
            data_dir=data,
            max_backlog=args.jobs + 1,
            max_active_per_client=args.jobs + 1,
            max_backlog_per_owner=0,
        )
        client = connect(settings)
        queue = Queue(client, settings)
        await queue.ensure_group()
        t0 = time.perf_counter()
        ids = await _fill(queue, args.jobs, args.clients)
        print(
            f"{args.jobs} jobs of {args.clients} clients submitted and ended in "
            f"{time.perf_counter() - t0:.1f} s"
        )
        console, keys = queue.console, queue.keys
        reads: dict[str, Callable[[], Awaitable[Any]]] = {
            "queue view (the live view's reading)": lambda: queue_view(queue),
            "search, a page of 50": lambda: console.search(lambda r: True, 50),
            f"search, a text no job has ({min(args.jobs, 5000)} jobs looked at)": lambda: (
                console.search(lambda r: True, 50, text="no such words")
            ),
            "a job's whole record": lambda: console.record(ids[len(ids) // 2]),
            "dead letters, a page of 50": lambda: console.dead_letters(50),
            "usage, 7 days": lambda: console.usage(7),
        }
        print(f"\n{'read':<58} {'median ms':>10}  [min - max]")
        for name, call in reads.items():
            times = await _timed(call, args.repeats)
            print(
                f"{name:<58} {statistics.median(times):>10.2f}  "
                f"[{min(times):.2f} - {max(times):.2f}]"
            )
        day = keys.tally(int(time.time() // 86_400))
        sizes = {
            f"the day's usage tally ({min(args.clients, USAGE_CLIENTS_PER_DAY)} clients apart, "
            "the rest as 'other')": day,
            f"the job index ({args.jobs} jobs)": keys.index,
            "one job's runs": keys.runs(ids[0]),
        }
        print(f"\n{'kept in Redis':<58} {'bytes':>10}")
        for name, key in sizes.items():
            used = await client.memory_usage(key) or 0
            print(f"{name:<58} {used:>10,}")
        fields = await client.hlen(day)
        print(
            f"\nthe day's tally has {fields} fields; per job in the index: "
            f"{(await client.memory_usage(keys.index) or 0) / args.jobs:.0f} bytes"
        )
        await client.aclose()


def main() -> int:
    parser = cli.parser("bench.console", __doc__, repeats=7)
    parser.add_argument("--jobs", type=int, default=5_000)
    parser.add_argument("--clients", type=int, default=3_000)
    asyncio.run(measure(parser.parse_args()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
