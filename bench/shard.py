"""What one job costs Redis: commands, bytes on the wire, main-thread CPU and memory kept, so that
a deployment can size its shards. `python -m bench.shard [--jobs 400] [--concurrency 16]`,
with finished audio in Redis, in a filesystem audio store and in an S3 bucket, interleaved in one
run; and each store's own throughput (writes and reads of one job's file, 16 at a time).

One embedded Redis (AOF everysec, as in production), one web process, `--workers` espeak
workers. Each job is submitted over HTTP and followed over SSE to its end (a script's path: the
doorbell, the event replays); then every result's audio is fetched once. Figures are Redis's own
counters (INFO commandstats, stats, cpu, memory) before and after, divided by the jobs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import time
from typing import Any

import aiohttp
import redis

from bench.lib import cli, report
from bench.lib.stack import start_stack
from cli.sse import sse_events
from core.audio_store.urls import open_store
from core.infra.settings import Settings
from testing.limits import LIMITS_OFF
from testing.procs import bench_run
from testing.s3_server import CREDENTIALS, S3Server

API_KEY = "shard-bench-key"
TEXT = "A sentence of ordinary length, as most jobs carry. And a second one after it."


def counters(client: redis.Redis) -> dict[str, float]:
    stats: Any = client.info("all")
    calls = sum(
        int(v.get("calls", 0))
        for k, v in stats.items()
        if k.startswith("cmdstat_") and k not in ("cmdstat_info",)
    )
    return {
        "calls": calls,
        "net_in": int(stats["total_net_input_bytes"]),
        "net_out": int(stats["total_net_output_bytes"]),
        "cpu_main_s": float(stats.get("used_cpu_sys_main_thread", stats["used_cpu_sys"]))
        + float(stats.get("used_cpu_user_main_thread", stats["used_cpu_user"])),
        "memory": int(stats["used_memory"]),
    }


async def one_job(session: aiohttp.ClientSession, url: str, i: int) -> float:
    """Submit, follow to the end, fetch the audio; the job's audio seconds."""
    body = {"text": f"{TEXT} Number {i}.", "voice": "en_male", "cache": False}
    async with session.post(f"{url}/v1/tts/jobs", json=body) as response:
        job = await response.json()
        if response.status != 202:
            raise RuntimeError(f"submit refused: {job}")
    async with session.get(f"{url}/v1/tts/jobs/{job['id']}/events") as events:
        async for sse in sse_events(events):
            if sse.event == "succeeded":
                duration = float(sse.json()["job"]["duration_s"])
                break
            if sse.event in ("failed", "cancelled", "dead"):
                raise RuntimeError(f"job {job['id']} did not succeed")
        else:
            raise RuntimeError(f"the events of job {job['id']} ended before it did")
    async with session.get(f"{url}/v1/tts/jobs/{job['id']}/audio") as audio:
        await audio.read()
    return duration


async def load(url: str, jobs: int, concurrency: int) -> tuple[float, float]:
    """Seconds the jobs took, and their mean audio seconds."""
    gate = asyncio.Semaphore(concurrency)
    headers = {"Authorization": f"Bearer {API_KEY}"}

    async def bounded(i: int) -> float:
        async with gate:
            return await one_job(session, url, i)

    async with aiohttp.ClientSession(headers=headers) as session:
        started = time.monotonic()
        durations = await asyncio.gather(*(bounded(i) for i in range(jobs)))
        return time.monotonic() - started, sum(durations) / len(durations)


STORES = ("redis", "file", "s3")
FILE_BYTES = 295_000  # one job's WAV here (6.1 s at 24 kHz, 16-bit)


async def store_throughput(url: str, concurrency: int, rounds: int = 200) -> dict[str, float]:
    """Writes and reads per second of one job's file, `concurrency` at a time, on the store
    alone (no Redis, no worker): what the store itself can carry."""
    store = open_store(url)
    assert store is not None
    data = bytes(FILE_BYTES)
    gate = asyncio.Semaphore(concurrency)

    async def timed(call: Any) -> None:
        async with gate:
            await call

    try:
        keys = [f"bench/jobs/{i:032x}/file.wav" for i in range(rounds)]
        started = time.monotonic()
        await asyncio.gather(*(timed(store.put(key, data)) for key in keys))
        wrote = time.monotonic() - started
        started = time.monotonic()
        await asyncio.gather(*(timed(store.get(key)) for key in keys))
        read = time.monotonic() - started
        await asyncio.gather(*(timed(store.delete(key)) for key in keys))
    finally:
        await store.aclose()
    return {"store_writes_per_s": round(rounds / wrote), "store_reads_per_s": round(rounds / read)}


def measure(args: argparse.Namespace, store: str = "redis") -> dict[str, Any]:
    """One run; `store`: where finished audio goes ("redis"; "file": a directory; "s3": a
    bucket on an S3-compatible server process)."""
    with bench_run("shard-", args.keep_logs) as (procs, tmp), contextlib.ExitStack() as cleanup:
        audio_store = "redis" if store == "redis" else f"file://{tmp / 'audio'}"
        if store == "s3":
            os.environ.update(CREDENTIALS)  # the service's processes inherit them
            server = S3Server(tmp / "s3.log").start()
            cleanup.callback(server.stop)
            asyncio.run(server.create_bucket("shard-bench"))
            audio_store = server.url("shard-bench")
        settings = Settings.of(
            engine="espeak",
            api_keys=API_KEY,
            data_dir=str(tmp / "data"),
            log_level="WARNING",
            max_active_per_client=100_000,
            max_backlog_per_owner=0,
            audio_store=audio_store,
        ).replace(**LIMITS_OFF)
        service = start_stack(procs, settings, args.workers, folder=tmp)
        url, redis_url = service.url, service.redis_url
        asyncio.run(load(url, 20, args.concurrency))  # warm: scripts loaded, connections open
        client = redis.Redis.from_url(redis_url)
        try:
            before = counters(client)
            elapsed, audio_s = asyncio.run(load(url, args.jobs, args.concurrency))
            time.sleep(1.5)  # the workers' heartbeats and the web's samples of the window
            after = counters(client)
        finally:
            client.close()
        own = (
            {} if store == "redis" else asyncio.run(store_throughput(audio_store, args.concurrency))
        )
    per_job = {k: (after[k] - before[k]) / args.jobs for k in before}
    # Idle traffic (heartbeats, web samples, blocking reads) is in these figures too: it is part
    # of what a shard carries, and small beside the jobs at this rate.
    return {
        "store": store,
        "jobs": args.jobs,
        "workers": args.workers,
        "jobs_per_s": round(args.jobs / elapsed, 1),
        "audio_s_per_job": round(audio_s, 2),
        "commands_per_job": round(per_job["calls"], 1),
        "bytes_in_per_job": round(per_job["net_in"]),
        "bytes_out_per_job": round(per_job["net_out"]),
        "redis_cpu_ms_per_job": round(per_job["cpu_main_s"] * 1000, 3),
        "memory_kept_per_job": round(per_job["memory"]),
        "jobs_per_s_per_core": round(1 / per_job["cpu_main_s"]) if per_job["cpu_main_s"] else None,
        **own,
    }


def main() -> int:
    p = cli.parser("bench.shard", __doc__, output="shard", repeats=3, logs=True)
    p.add_argument("--jobs", type=int, default=400)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--stores", default=",".join(STORES), help="where audio goes: redis,file,s3")
    args = p.parse_args()
    stores = [s for s in args.stores.split(",") if s]
    runs = [measure(args, store) for _ in range(args.repeats) for store in stores]  # interleaved
    summary = {
        store: {
            key: {
                "median": round(statistics.median(r[key] for r in mine), 3),
                "min": min(r[key] for r in mine),
                "max": max(r[key] for r in mine),
            }
            for key in mine[0]
            if key not in ("store", "jobs", "workers")
        }
        for store in stores
        if (mine := [r for r in runs if r["store"] == store])
    }
    report.write_json(args.output, {"runs": runs, "summary": summary})
    header = "".join(f"{'audio in ' + store:>32}" for store in stores)
    print(f"{'median (min to max)':24} {header}")
    for key in {key: None for store in stores for key in summary[store]}:
        cells = [summary[store].get(key) for store in stores]
        row = "".join(
            f"{'{median:g} ({min:g} to {max:g})'.format(**cell) if cell else '-':>32}"
            for cell in cells
        )
        print(f"{key:24} {row}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
