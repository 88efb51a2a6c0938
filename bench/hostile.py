"""Hostile clients against one web process with the shipped limits, an honest client beside them.

`python -m bench.hostile [--seconds S] [--quick]`: embedded Redis, one web process (production
settings: rate limits and caps on), one eSpeak NG worker. An honest client on 127.0.0.1 submits
jobs one by one, first alone, then while attackers on other loopback addresses (127.0.0.2-9)
flood it: fresh identities submitting, submit-then-cancel churn, hundreds of event streams,
decompression and media bombs, huge embedding strings, stalled uploads (multipart and
urlencoded), 4,000-digit texts, cross-site form posts, downloads that are never read, audio
streams past the cap, transcripts of characters normalization drops, and callbacks of jobs
cancelled at once; and, before the worker starts, fresh identities of one address filling its
storage account (scaled down) until it refuses them. Reports requests tried by kind and status,
5xx (must be 0), the web process's peak RSS (its Kubernetes limit is 1 GiB), Redis memory
growth per refused or cancelled request, and the honest client's submit latency, alone and
under attack (p99 within 2x). `--pin` keeps the worker and the attackers off the
web process's, Redis's and the honest client's core.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import redis

from bench.attacks import EVIL, LOOP_RATE, Tally, attack_process, request, session
from bench.lib import cli, report
from bench.lib.cli import REPO_ROOT
from bench.lib.stack import shipped_limits, start_ours, start_redis, wait_http
from bench.lib.stats import p99
from core.audio.sizes import expected_bytes
from core.infra.settings import Settings
from core.queue.keys import Keys
from testing.procs import Processes, bench_run

WEB_LIMIT_KB = 1024 * 1024  # the web pod's memory limit in docker/k8s/web.yaml
# The address's storage cap, scaled down from 16 GiB so that the fill reaches it in seconds
# (the admission is the same at any size): about 20 jobs of 4,000 characters.
STORAGE_FILL_CAP = 256 * 1024**2
FILL_ADDRESS = "127.0.0.7"
HONEST_GAP_S = 0.25  # the honest client's pace: 4 submissions a second, under its 5/s
REDIS_MAXMEMORY = 1024**3
ADMIN_KEY = "hostile-bench-admin-key-0123456789abcdef"  # the embedded Redis's and compose's
WATCH_S = 0.25


async def honest(url: str, jobs: int, tally: Tally) -> list[float]:
    """Submit `jobs` jobs one by one; every one must succeed. Submit latencies in seconds."""
    latencies, ids = [], []
    async with session("127.0.0.1", jar=True) as http:
        for i in range(jobs):
            started = time.perf_counter()
            async with http.post(f"{url}/v1/tts/jobs", json={"text": f"Honest job {i}."}) as r:
                body = await r.json()
                tally.add("honest submit", r.status)
            latencies.append(time.perf_counter() - started)
            if r.status != 202:
                raise RuntimeError(f"the honest client was refused: {r.status} {body}")
            ids.append(body["id"])
            await asyncio.sleep(HONEST_GAP_S)
        deadline = time.monotonic() + 300
        for job_id in ids:
            while True:
                async with http.get(f"{url}/v1/tts/jobs/{job_id}") as r:
                    state = (await r.json())["state"]
                if state == "succeeded":
                    break
                if state in ("failed", "dead", "cancelled") or time.monotonic() > deadline:
                    raise RuntimeError(f"honest job {job_id} ended {state}")
                await asyncio.sleep(0.1)
    return latencies


async def _under_attack(
    url: str,
    port: int,
    seconds: float,
    jobs: int,
    rate: float,
    skip: frozenset[str],
    place: Callable[[int], None],
    store: redis.Redis,
    audio_dir: Path,
    readings: dict[str, Any],
) -> tuple[list[float], Tally]:
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    attacker = context.Process(
        target=attack_process, args=(url, port, seconds, rate, skip, results)
    )
    attacker.start()
    place(attacker.pid or 0)
    await asyncio.sleep(1.0)  # the attack is on before the honest client starts
    honest_tally = Tally()
    watching = asyncio.create_task(watch(url, store, audio_dir, readings))
    try:
        latencies = await honest(url, jobs, honest_tally)
        counts, stalled = await asyncio.to_thread(results.get, True, seconds + 120)
    finally:
        watching.cancel()
    await asyncio.to_thread(attacker.join, 30)
    tally = Tally()
    tally.counts.update(counts)
    tally.counts.update(honest_tally.counts)
    tally.stalled = stalled
    return latencies, tally


async def watch(url: str, store: redis.Redis, audio_dir: Path, readings: dict[str, Any]) -> None:
    """Every WATCH_S while the attack lasts: /healthz's answer time (the event loop is never
    frozen), Redis's memory (never at its maxmemory) and the store's free disk (never full)."""
    readings.update(healthz=[], redis_peak=0, store_min_free=None)
    async with session("127.0.0.1") as http:
        while True:
            started = time.perf_counter()
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with http.get(f"{url}/healthz") as r:
                    await r.read()
            readings["healthz"].append(time.perf_counter() - started)
            used = int((await asyncio.to_thread(store.info, "memory"))["used_memory"])
            readings["redis_peak"] = max(readings["redis_peak"], used)
            free = await asyncio.to_thread(_free_bytes, audio_dir)
            if free is not None:
                low = readings["store_min_free"]
                readings["store_min_free"] = free if low is None else min(low, free)
            await asyncio.sleep(WATCH_S)


async def _growth_perrequest(url: str, store: redis.Redis, count: int) -> tuple[float, float, int]:
    """Redis bytes added per refused request (cross-site, rate-limited) and per job cancelled
    while queued (its record lives CHATTTS_UNSTARTED_TTL_S)."""
    tally = Tally()
    # The data set alone: what was kept. used_memory also counts buffers that come and go with
    # other clients' replies and an AOF rewrite (once 1.2 MB across a quick run's refusals).
    # The least of three rounds: the workers may still be storing an earlier phase's jobs, which
    # only adds to a round (once 500 KB across a quick run's refusals).
    rounds = []
    async with session("127.0.0.9") as http:
        for _ in range(3):
            before = int(store.info("memory")["used_memory_dataset"])
            for _ in range(count):
                call = http.post(f"{url}/v1/tts/jobs", json={"text": "x"}, headers={"Origin": EVIL})
                await request(tally, "refused", call)
            rounds.append((int(store.info("memory")["used_memory_dataset"]) - before) / count)
    refused = min(rounds)
    keys = Keys(Settings().redis.key_prefix, Settings().redis.queue)
    held, ttls = 0, []
    async with session("127.0.0.8", jar=True) as http:
        for i in range(count):
            async with http.post(f"{url}/v1/tts/jobs", json={"text": f"Cancel me {i}."}) as r:
                job = await r.json()
            await request(tally, "cancel", http.delete(f"{url}/v1/tts/jobs/{job['id']}"))
            # What the job still holds: its record and its own events (MEMORY USAGE, exact).
            for key in (keys.job(job["id"]), keys.job_events(job["id"])):
                held += int(store.memory_usage(key, samples=0) or 0)
                ttls.append(int(store.ttl(key)))
            await asyncio.sleep(0.2)  # within the client's rate
    return refused, held / count, max(ttls)


async def _storage_fill(url: str, store: redis.Redis, attempts: int) -> dict[str, Any]:
    """Fresh identities from one address submit the longest jobs until its storage account
    refuses them; then they cancel every one, and the charge must come back to 0."""
    tally, admitted = Tally(), []
    keys = Keys(Settings().redis.key_prefix, Settings().redis.queue)
    account = keys.usage(f"address:{FILL_ADDRESS}")
    text = "Fill the store with audio. " * 148  # 3,996 characters: the longest plain job
    refused = 0
    for _ in range(attempts):
        # No cookie: a new client each time.
        async with (
            session(FILL_ADDRESS) as http,
            http.post(f"{url}/v1/tts/jobs", json={"text": text}) as r,
        ):
            body = await r.json()
            tally.add("storage fill", r.status)
            if r.status == 202:
                cookie = "; ".join(f"{k}={m.value}" for k, m in r.cookies.items())
                admitted.append((body["id"], cookie))
            elif body["error"]["code"] == "storage_quota":
                refused += 1
                if refused >= 5:
                    break
        await asyncio.sleep(0.06)  # under the address's 20 submissions a second
    reserved = int(store.hget(account, "total") or 0)
    for job_id, cookie in admitted:
        async with session(FILL_ADDRESS) as http:
            call = http.delete(f"{url}/v1/tts/jobs/{job_id}", headers={"Cookie": cookie})
            await request(tally, "storage fill: cancel", call)
    return {
        "storage_fill_jobs_admitted": len(admitted),
        "storage_fill_refused": refused,
        "storage_fill_reserved_mb": reserved / 1024**2,
        "storage_fill_cap_mb": STORAGE_FILL_CAP / 1024**2,
        "storage_fill_after_cancel_bytes": int(store.hget(account, "total") or 0),
        "storage_fill_server_errors": tally.server_errors,
    }


def _free_bytes(path: Path) -> int | None:
    return shutil.disk_usage(path).free if path.exists() else None


def _charges_match_what_is_kept(store: redis.Redis) -> dict[str, Any]:
    """Every finished job's storage charge against the bytes it keeps in the store: the charge
    is corrected to them when it ends, and its estimate at submission must not have been lower
    (the store's room was reserved by it)."""
    keys = Keys(Settings().redis.key_prefix, Settings().redis.queue)
    under, worst, jobs = 0, 0.0, 0
    for raw in store.scan_iter(match=keys.job("*"), count=1000):
        fields = store.hmget(raw, "state", "charge", "audio_size", "document", "request")
        if fields[0] != b"succeeded" or fields[1] is None:
            continue
        kept = int(fields[2] or 0) * (1 if fields[3] == b"1" else 2)
        request = json.loads(fields[4] or b"{}")
        speed = float(request.get("speed") or 1.0)
        estimate = expected_bytes(
            request.get("text", ""), request.get("format", "wav"), False, speed
        )
        jobs += 1
        worst = max(worst, kept / max(1, estimate))
        under += int(fields[1]) != kept
    return {
        "charged_jobs": jobs,
        "charges_not_corrected": under,
        "kept_over_estimate_worst": worst,  # <= 1: no job kept more than it was charged
    }


def measure(args: argparse.Namespace, procs: Processes, tmp: Path) -> dict[str, Any]:
    cores = sorted(os.sched_getaffinity(0))

    def elsewhere(pid: int) -> None:
        """With --pin, the web process, Redis and the honest client share one core; the worker
        and the attackers take the others. The attack's own work (its client, the synthesis of
        its accepted jobs, on GPU machines in production) then does not share the honest
        client's core: what is measured is the guards of the web tier, not CPU sharing."""
        if args.pin:
            os.sched_setaffinity(pid, cores[1:])

    if args.pin:
        os.sched_setaffinity(0, cores[:1])  # this process (the honest client), and the web
    redis_url = start_redis(procs, tmp)
    store_url = f"file://{tmp / 'audio'}"  # as `run` and the deployments ship: audio off Redis
    ours = start_ours(
        procs,
        redis_url,
        tmp,
        **shipped_limits(),
        storage_per_address_bytes=STORAGE_FILL_CAP,
        audio_store=store_url,
        admin_keys=ADMIN_KEY,  # the console on: its keys are what the guessers try
    )
    url, web = ours.url, ours.web
    worker = Settings.of(
        redis_url=redis_url, engine="espeak", data_dir=str(tmp / "w"), audio_store=store_url
    )
    env = {**os.environ, **worker.to_env(), "CHATTTS_WORKER_METRICS_PORT": "0"}
    port = int(url.rsplit(":", 1)[1])
    store = redis.Redis.from_url(redis_url)
    store.config_set("maxmemory", REDIS_MAXMEMORY)  # as `run` and compose ship it
    store.config_set("maxmemory-policy", "noeviction")

    async def run() -> dict[str, Any]:
        # No worker yet: the cancelled jobs are cancelled while queued, as the figure means.
        refused_b, cancelled_b, ttl = await _growth_perrequest(url, store, args.growth_requests)
        fill = await _storage_fill(url, store, attempts=60)
        worker_proc = procs.start(
            "ours-worker", [sys.executable, "-m", "cli", "worker"], env, cwd=REPO_ROOT
        )
        elsewhere(worker_proc.pid)
        await asyncio.to_thread(wait_http, procs, f"{url}/readyz")
        idle_tally = Tally()
        idle = await honest(url, args.jobs, idle_tally)
        readings: dict[str, Any] = {}
        under, tally = await _under_attack(
            url,
            port,
            args.seconds,
            args.jobs,
            args.attack_rate,
            frozenset(args.skip),
            elsewhere,
            store,
            tmp / "audio",
            readings,
        )
        charged = await asyncio.to_thread(_charges_match_what_is_kept, store)
        counts = tally.counts
        return {
            "requests": {f"{k} -> {s or 'no answer'}": n for (k, s), n in sorted(counts.items())},
            "attack_requests": sum(n for (k, _), n in counts.items() if k != "honest submit"),
            "stalled_uploads": tally.stalled,
            "server_errors": tally.server_errors
            + idle_tally.server_errors
            + fill["storage_fill_server_errors"],
            "web_peak_rss_mb": _peak_rss_kb(web.pid) / 1024,
            "web_rss_limit_mb": WEB_LIMIT_KB / 1024,
            "redis_bytes_per_refused_request": refused_b,
            "redis_bytes_per_cancelled_job": cancelled_b,
            "cancelled_job_kept_s": ttl,
            **fill,
            **charged,
            "healthz_p99_ms_under_attack": p99(readings["healthz"]) * 1000,
            "healthz_max_ms_under_attack": max(readings["healthz"]) * 1000,
            "redis_peak_mb_under_attack": readings["redis_peak"] / 1024**2,
            "redis_maxmemory_mb": REDIS_MAXMEMORY / 1024**2,
            "store_min_free_mb_under_attack": (readings["store_min_free"] or 0) / 1024**2,
            "honest_idle_p50_ms": statistics.median(idle) * 1000,
            "honest_idle_p99_ms": p99(idle) * 1000,
            "honest_attack_p50_ms": statistics.median(under) * 1000,
            "honest_attack_p99_ms": p99(under) * 1000,
            "honest_jobs_succeeded": 2 * args.jobs,
            "attack_requests_per_s": sum(n for (k, _), n in counts.items() if k != "honest submit")
            / args.seconds,
        }

    try:
        return asyncio.run(run())
    finally:
        store.close()


def _peak_rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def main(argv: list[str] | None = None) -> int:
    p = cli.parser("bench.hostile", __doc__, quick="5 s, 12 jobs", output="hostile", logs=True)
    p.add_argument("--seconds", type=float, default=30.0, help="how long the attack lasts")
    p.add_argument("--jobs", type=int, default=60, help="honest jobs, alone and under attack")
    p.add_argument(
        "--attack-rate", type=float, default=LOOP_RATE, help="iterations/s of each attack loop"
    )
    p.add_argument(
        "--skip",
        nargs="*",
        default=[],
        help="attacks to leave out: fresh_identities churn open_streams voice_bombs digits "
        "cross_site",
    )
    p.add_argument(
        "--pin",
        action="store_true",
        help="the web process on one core, everything else on the others (needs 2 or more)",
    )
    p.add_argument("--growth-requests", type=int, default=50, help="requests per growth figure")
    args = p.parse_args(argv)
    if args.quick:
        args.seconds, args.jobs, args.growth_requests = 5.0, 12, 10
    with bench_run("chattts-hostile-", args.keep_logs) as (procs, tmp):
        figures = measure(args, procs, tmp)
    for name, value in figures.items():
        if name != "requests":
            print(f"{name:48} {value:.1f}" if isinstance(value, float) else f"{name:48} {value}")
    for name, n in figures["requests"].items():
        print(f"  {name:60} {n}")
    ratio = figures["honest_attack_p99_ms"] / max(1e-9, figures["honest_idle_p99_ms"])
    print(f"{'honest p99 under attack / alone':48} {ratio:.2f}x (target <= 2x)")
    report.write_json(args.output, {**figures, "p99_ratio": ratio})
    ok = figures["server_errors"] == 0 and figures["web_peak_rss_mb"] < figures["web_rss_limit_mb"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
