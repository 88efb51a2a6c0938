"""A soak of the service as `chattts-online run` ships it, at a sustainable rate: is Redis flat?

`python -m bench.soak [--minutes M] [--rate R] [--maxmemory SIZE] [--quick]`: an embedded Redis
(as `run` starts it, with a `maxmemory` small enough that a few minutes fill it, so the run shows
what a day does to the shipped 1 GB), one web process with the shipped limits and an audio store
on disk, two eSpeak NG workers (with MALLOC_ARENA_MAX=2, as `run` sets, or `--malloc-arenas`);
mixed traffic from one address at R jobs a second: jobs followed over SSE, OpenAI whole answers,
subtitles fetched afterwards, a cancel now and then, a fresh identity for every tenth job. Every
SAMPLE_S: Redis's memory, the processes' RSS. Reports what a finished job keeps in Redis, Redis at
the end of each quarter (flat once it nears its maxmemory: the oldest finished jobs go first),
each process's memory growth per hour after the first quarter, the submit latency, and jobs lost
(must be 0).

`--tracemalloc`: the workers run under bench.lib.tracehook, their Python allocations traced; a
snapshot near the end of the first quarter (warm-up) and one at the end, and the memory that
tracemalloc sees at each quarter's end; the bench prints, per worker, the source lines whose live
blocks grew most between the two snapshots. Tracing slows every allocation, and its own tables
count in the RSS: the RSS figures of such a run are not those of an untraced one.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import signal
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import redis

from bench.lib import cli, report, tracehook
from bench.lib.stack import start_stack
from bench.lib.stats import p99
from core.infra.settings import Settings
from core.queue.keys import Keys
from testing.procs import Processes, bench_run

SAMPLE_S = 5.0
# How long a traced worker may take to write its last snapshot (its copy's limit is 240 s).
SNAPSHOT_TIMEOUT_S = 300.0
TEXTS = (
    "The weather today is mild, with a light breeze from the west.",
    "Please remember to bring the documents to the meeting on Tuesday.",
    "A short answer, read aloud.",
    "She counted 12 boats in the harbour at 7:30 this morning.",
)


@dataclass
class Load:
    submitted: int = 0
    cancelled: int = 0
    latencies: list[float] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    errors: int = 0  # 5xx or a refused honest request


@dataclass
class Tracing:
    """The workers run under bench.lib.tracehook, each writing into its folder."""

    folders: dict[str, Path]  # by the worker's name in the report
    pids: dict[str, int]

    def signal(self, sig: signal.Signals) -> None:
        for pid in self.pids.values():
            os.kill(pid, sig)

    async def quarters(self, seconds: float) -> None:
        """The first snapshot at the end of the first quarter, a reading at the ends of the
        second and third."""
        start = time.monotonic()
        marks = ((1, signal.SIGUSR1), (2, signal.SIGUSR2), (3, signal.SIGUSR2))
        for quarter, sig in marks:
            await asyncio.sleep(max(0.0, start + seconds * quarter / 4 - time.monotonic()))
            self.signal(sig)

    async def last_snapshot(self) -> bool:
        """A reading and a snapshot, the last: whether every worker wrote it in time."""
        self.signal(signal.SIGUSR1)
        deadline = time.monotonic() + SNAPSHOT_TIMEOUT_S
        while any(len(tracehook.snapshots(f)) < 2 for f in self.folders.values()):
            if time.monotonic() > deadline:
                print(f"no last snapshot within {SNAPSHOT_TIMEOUT_S:.0f} s", file=sys.stderr)
                return False
            await asyncio.sleep(0.5)
        return True

    def report(self) -> dict[str, Any]:
        """Per worker: its readings, what grew from the first snapshot to the last."""
        return {
            name: {"readings": tracehook.readings(folder), "growth": tracehook.growth(folder)}
            for name, folder in self.folders.items()
        }


async def one_job(
    sessions: tuple[aiohttp.ClientSession, aiohttp.ClientSession], url: str, n: int, load: Load
) -> None:
    """One client action: its kind by `n` (a job followed over SSE, an OpenAI answer, a job and
    its subtitles, a job cancelled at once); every tenth from a fresh identity (no cookie)."""
    http = sessions[1] if n % 10 == 9 else sessions[0]
    text = TEXTS[n % len(TEXTS)] + f" Number {n}."
    headers = None
    started = time.perf_counter()
    if n % 5 == 1:
        body = {"model": "tts-1", "input": text, "voice": "alloy", "response_format": "mp3"}
        async with http.post(f"{url}/v1/audio/speech", json=body, headers=headers) as r:
            await r.read()
            load.errors += r.status != 200
            load.submitted += 1
        return
    async with http.post(f"{url}/v1/tts/jobs", json={"text": text}, headers=headers) as r:
        job = await r.json()
    load.latencies.append(time.perf_counter() - started)
    load.submitted += 1
    if r.status != 202:
        load.errors += 1
        return
    load.ids.append(job["id"])
    if n % 20 == 7:
        async with http.delete(f"{url}/v1/tts/jobs/{job['id']}") as c:
            load.cancelled += (await c.json()).get("state") == "cancelled"
        return
    if n % 5 == 2:
        async with http.get(f"{url}{job['events_url']}") as events:
            async for _ in events.content:  # to its end: the stream closes after the last event
                pass
        async with http.get(f"{url}/v1/tts/jobs/{job['id']}/subtitles") as s:
            await s.read()
            load.errors += s.status >= 500


async def drive(url: str, rate: float, seconds: float, load: Load) -> None:
    jar, none = aiohttp.CookieJar(unsafe=True), aiohttp.DummyCookieJar()
    async with (
        aiohttp.ClientSession(cookie_jar=jar) as http,
        aiohttp.ClientSession(cookie_jar=none) as fresh,
    ):
        pending: set[asyncio.Task[None]] = set()
        start = time.monotonic()
        for n in itertools.count():
            due = start + n / rate
            if due - start >= seconds:
                break
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            task = asyncio.create_task(one_job((http, fresh), url, n, load))
            pending.add(task)
            task.add_done_callback(pending.discard)
        if pending:
            await asyncio.wait(pending, timeout=120)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def sample(
    store: redis.Redis, keys: Keys, pids: dict[str, int], samples: list[dict[str, Any]]
) -> None:
    start = time.monotonic()
    while True:
        memory = await asyncio.to_thread(store.info, "memory")
        ends = await asyncio.to_thread(store.hmget, keys.stats, ["succeeded", "cancelled"])
        samples.append(
            {
                "t": time.monotonic() - start,
                "redis_mb": int(memory["used_memory"]) / 1024**2,
                "dataset_mb": int(memory["used_memory_dataset"]) / 1024**2,
                "finished": sum(int(v or 0) for v in ends),
                **{f"{name}_mb": rss_mb(pid) for name, pid in pids.items()},
            }
        )
        await asyncio.sleep(SAMPLE_S)


def ended(store: redis.Redis, keys: Keys, ids: list[str]) -> tuple[int, int]:
    """Jobs that ended (or were removed early, having ended) and those still unfinished."""
    done = waiting = 0
    for first in range(0, len(ids), 500):
        batch = ids[first : first + 500]
        with store.pipeline(transaction=False) as pipe:
            for job_id in batch:
                pipe.hget(keys.job(job_id), "state")
            for state in pipe.execute():
                if state in (b"queued", b"running"):
                    waiting += 1
                else:
                    done += 1
    return done, waiting


def measure(args: argparse.Namespace, procs: Processes, tmp: Path) -> dict[str, Any]:
    settings = Settings.of(
        engine="espeak",
        host="127.0.0.1",
        data_dir=str(tmp / "data"),
        audio_store=f"file://{tmp / 'audio'}",
        log_level="WARNING",
    )
    environ = dict(os.environ)
    environ.pop("MALLOC_ARENA_MAX", None)
    if args.malloc_arenas:  # as `run` and the images set it; 0: glibc's own (one per thread)
        environ["MALLOC_ARENA_MAX"] = str(args.malloc_arenas)
    tracing = Tracing({}, {}) if args.tracemalloc else None

    def traced(n: int) -> tuple[str, dict[str, str]]:  # worker n (from 1) under the hook
        assert tracing is not None
        folder = tmp / "tracemalloc" / f"worker{n - 1}"
        tracing.folders[f"worker{n - 1}"] = folder
        return "bench.lib.tracehook", {
            tracehook.DIR_ENV: str(folder),
            tracehook.FRAMES_ENV: str(args.trace_frames),
        }

    service = start_stack(
        procs,
        settings,
        args.workers,
        folder=tmp,
        maxmemory=args.maxmemory,
        environ=environ,
        worker_hook=traced if tracing else None,
    )
    url = service.url
    pids = {"web": service.web.pid}
    pids.update({f"worker{n}": worker.pid for n, worker in enumerate(service.workers)})
    if tracing:
        tracing.pids.update({name: pids[name] for name in tracing.folders})
    store = redis.Redis.from_url(service.redis_url)
    keys = Keys(settings.redis.key_prefix, settings.redis.queue)
    load, samples = Load(), list[dict[str, Any]]()

    async def run() -> None:
        sampler = asyncio.create_task(sample(store, keys, pids, samples))
        marks = asyncio.create_task(tracing.quarters(args.minutes * 60)) if tracing else None
        try:
            await drive(url, args.rate, args.minutes * 60, load)
            await asyncio.sleep(5)  # the last jobs end
        finally:
            sampler.cancel()
            if marks:
                marks.cancel()
        if tracing:
            await tracing.last_snapshot()

    try:
        asyncio.run(run())
        done, waiting = ended(store, keys, load.ids)
        removed = int(store.hget(keys.stats, "retired_early") or 0)
    finally:
        store.close()
    return {
        "minutes": args.minutes,
        "rate_jobs_per_s": args.rate,
        "maxmemory_mb": server_limit_mb(args),
        "submitted": load.submitted,
        "errors": load.errors,
        "jobs_lost": len(load.ids) - done - waiting,
        "jobs_unfinished_at_end": waiting,
        "finished_jobs_removed_early": removed,
        **figures(samples, server_limit_mb(args), list(pids)),
        "submit_p50_ms": statistics.median(load.latencies) * 1000 if load.latencies else 0.0,
        "submit_p99_ms": p99(load.latencies) * 1000,
        **({"tracemalloc": tracing.report(), "trace_frames": args.trace_frames} if tracing else {}),
        "samples": samples,
    }


def figures(samples: list[dict[str, Any]], limit_mb: float, names: list[str]) -> dict[str, Any]:
    """What a finished job keeps (the data set's growth over the jobs that ended, before
    Redis nears its maxmemory), Redis at each quarter's end, each process's growth per hour
    after the first quarter."""
    quarter = max(1, len(samples) // 4)
    filling = [s for s in samples if s["redis_mb"] < 0.8 * limit_mb] or samples[:2]
    grown = (filling[-1]["dataset_mb"] - filling[0]["dataset_mb"]) * 1024
    ended = max(1, filling[-1]["finished"] - filling[0]["finished"])
    after = samples[quarter:] if len(samples) > quarter + 1 else samples
    hours = max(1e-9, (after[-1]["t"] - after[0]["t"]) / 3600)
    out: dict[str, Any] = {
        "redis_kb_per_finished_job": grown / ended,
        "redis_mb_by_quarter": by_quarter(samples, "redis_mb"),
        "redis_peak_mb": max(s["redis_mb"] for s in samples),
    }
    for name in names:
        growth = after[-1][f"{name}_mb"] - after[0][f"{name}_mb"]
        out[f"{name}_mb_per_hour_after_warmup"] = growth / hours
        out[f"{name}_mb_by_quarter"] = by_quarter(samples, f"{name}_mb")
    return out


def by_quarter(samples: list[dict[str, Any]], name: str) -> list[float]:
    """A figure at the end of each quarter of the run."""
    quarter = max(1, len(samples) // 4)
    return [round(samples[min(len(samples) - 1, q * quarter - 1)][name], 1) for q in (1, 2, 3, 4)]


def print_tracing(report: dict[str, Any]) -> None:
    """Per traced worker: what tracemalloc saw at each quarter's end, what the RSS was, and the
    lines whose live blocks grew most from the first snapshot (warm-up) to the last."""
    for name, traced in report["tracemalloc"].items():
        lines = traced["readings"]
        if len(lines) < 4:
            print(f"{name}: {len(lines)} tracemalloc readings, not 4")
            continue
        first, last = lines[0], lines[-1]
        traced_mb = ", ".join(f"{r['traced_mb']:.1f}" for r in lines)
        rss = ", ".join(f"{r['rss_mb']:.1f}" for r in lines)
        print(
            f"\n{name} under tracemalloc ({report['trace_frames']} frames): "
            f"traced {traced_mb} MB, RSS {rss} MB "
            f"(the first snapshot, then the ends of the 2nd to 4th quarters); "
            f"tracemalloc's own {last['tracemalloc_own_mb']:.1f} MB at the end"
        )
        print(
            f"  first snapshot to last: traced {last['traced_mb'] - first['traced_mb']:+.2f} MB "
            f"(its peak {first['traced_peak_mb']:.1f} to {last['traced_peak_mb']:.1f} MB), "
            f"RSS {last['rss_mb'] - first['rss_mb']:+.1f} MB (the fork of a snapshot: "
            f"{first['fork_ms']:.0f} and {last['fork_ms']:.0f} ms)"
        )
        if "malloc_in_use_mb" in last:
            held = (("in_use", "in use"), ("free", "free"), ("mmapped", "mapped"))
            print(
                "  C's malloc: "
                + ", ".join(
                    f"{label} {first[f'malloc_{k}_mb']:.1f} to {last[f'malloc_{k}_mb']:.1f} MB"
                    for k, label in held
                )
            )
        print("  grew most between the two snapshots, by line (live blocks):")
        for site in traced["growth"]:
            print(
                f"  {site['grew_kb']:+9.1f} KB {site['blocks_grew']:+7d} blocks "
                f"(now {site['size_kb']:.0f} KB)  {site['site']}  {site['code'][:60]}"
            )
            if "path" in site:
                print(f"      {site['path_grew_kb']:+.1f} KB via " + " > ".join(site["path"]))


def server_limit_mb(args: argparse.Namespace) -> float:
    size = args.maxmemory.lower()
    scale = {"kb": 1 / 1024, "mb": 1, "gb": 1024}
    return next(float(size[: -len(u)]) * f for u, f in scale.items() if size.endswith(u))


def main(argv: list[str] | None = None) -> int:
    p = cli.parser("bench.soak", __doc__, quick="2 minutes, 4 MB", output="soak", logs=True)
    p.add_argument("--minutes", type=float, default=15.0)
    p.add_argument("--rate", type=float, default=2.0, help="client actions a second")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument(
        "--malloc-arenas", type=int, default=2, help="MALLOC_ARENA_MAX (0: glibc's default)"
    )
    p.add_argument("--maxmemory", default="10mb", help="Redis's (the shipped one is 1gb)")
    p.add_argument(
        "--tracemalloc",
        action="store_true",
        help="trace the workers' Python allocations; print what grew after the first quarter",
    )
    p.add_argument("--trace-frames", type=int, default=tracehook.DEFAULT_FRAMES)
    args = p.parse_args(argv)
    if args.quick:
        args.minutes, args.maxmemory = 2.0, "4mb"
    with bench_run("chattts-soak-", args.keep_logs) as (procs, tmp):
        figures = measure(args, procs, tmp)
    for name, value in figures.items():
        if name not in ("samples", "tracemalloc"):
            shown = f"{value:.1f}" if isinstance(value, float) else value
            print(f"{name:40} {shown}")
    if "tracemalloc" in figures:
        print_tracing(figures)
    report.write_json(args.output, figures)
    ok = figures["jobs_lost"] == 0 and figures["errors"] == 0
    ok = ok and figures["redis_peak_mb"] < figures["maxmemory_mb"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
