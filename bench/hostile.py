"""Hostile clients against one web process with the shipped limits, an honest client beside them.

`python -m bench.hostile [--seconds S] [--quick]`: embedded Redis, one web process (production
settings: rate limits and caps on), one eSpeak NG worker. An honest client on 127.0.0.1 submits
jobs one by one, first alone, then while attackers on other loopback addresses (127.0.0.2-9)
flood it: fresh identities submitting, submit-then-cancel churn, hundreds of event streams,
decompression and media bombs, huge embedding strings, stalled uploads (multipart and
urlencoded), 4,000-digit texts, cross-site form posts, downloads that are never read, audio
streams past the cap, transcripts of characters normalization drops, and callbacks of jobs
cancelled at once. Reports requests tried by kind and status, 5xx (must be 0), the web
process's peak RSS (its Kubernetes limit is 1 GiB), Redis memory growth per refused or cancelled
request, and the honest client's submit latency, alone and under attack (p99 within 2x).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import io
import json
import lzma
import multiprocessing
import os
import socket
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import redis
import soundfile as sf

from bench.procs import Processes, bench_run
from bench.servers import REPO_ROOT, start_ours, start_redis, wait_http
from core.infra.settings import LIMITS_OFF, Settings
from core.queue.keys import Keys

WEB_LIMIT_KB = 1024 * 1024  # the web pod's memory limit in docker/k8s/web.yaml
HONEST_GAP_S = 0.25  # the honest client's pace: 4 submissions a second, under its 5/s
ATTACKERS = [f"127.0.0.{i}" for i in range(2, 10)]
EVIL = "https://evil.example"
# Iterations per second of each of the attack's 12 loops (25: about 330 requests a second).
LOOP_RATE = 25.0


def _b14(data: bytes) -> str:
    flat = np.unpackbits(np.frombuffer(data, np.uint8))
    rows = np.concatenate([flat, np.zeros(-len(flat) % 14, np.uint8)]).reshape(-1, 14)
    codes = np.packbits(np.pad(rows, ((0, 0), (2, 0))).ravel()).view(">u2") + 0x4E00
    rest = len(data) % 7
    return "".join(map(chr, codes.tolist())) + (chr(0x3D00 + rest) if rest else "")


def _bombs() -> dict[str, Any]:
    compressor = lzma.LZMACompressor(
        format=lzma.FORMAT_RAW, filters=[{"id": lzma.FILTER_LZMA2, "preset": 1}]
    )
    block = bytes(1 << 20)
    stream = b"".join(compressor.compress(block) for _ in range(128)) + compressor.flush()
    flac = io.BytesIO()
    sf.write(flac, np.zeros((96_000, 8), np.int16), 48_000, format="FLAC")
    return {
        "lzma": {"name": "bomb", "embedding": _b14(stream)},  # 128 MB once inflated
        "long": {"name": "long", "embedding": _b14(bytes(range(256)) * 2_600)},
        "flac": flac.getvalue(),
        # Characters that normalization drops, between spaces: once quadratic (14 s of the web
        # process's loop); a transcript is at most 500 characters now.
        "transcript": {"name": "dropped", "embedding": "x", "transcript": " ж" * 50_000},
    }


class Tally:
    def __init__(self) -> None:
        self.counts: collections.Counter[tuple[str, int]] = collections.Counter()
        self.stalled = 0  # uploads opened and never finished

    def add(self, kind: str, status: int) -> None:
        self.counts[(kind, status)] += 1

    @property
    def server_errors(self) -> int:
        return sum(n for (_, status), n in self.counts.items() if status >= 500)


def _session(address: str | None = None, jar: bool = False) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(local_addr=(address, 0) if address else None, limit=0)
    cookies = aiohttp.CookieJar(unsafe=True) if jar else aiohttp.DummyCookieJar()
    return aiohttp.ClientSession(
        connector=connector, cookie_jar=cookies, timeout=aiohttp.ClientTimeout(total=30)
    )


async def _request(tally: Tally, kind: str, call: Awaitable[aiohttp.ClientResponse]) -> int:
    try:
        async with await call as response:
            await response.read()
            tally.add(kind, response.status)
            return response.status
    except (aiohttp.ClientError, TimeoutError):
        tally.add(kind, 0)  # refused or cut: no answer
        return 0


async def honest(url: str, jobs: int, tally: Tally) -> list[float]:
    """Submit `jobs` jobs one by one; every one must succeed. Submit latencies in seconds."""
    latencies, ids = [], []
    async with _session("127.0.0.1", jar=True) as http:
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


async def attack(
    url: str,
    port: int,
    seconds: float,
    tally: Tally,
    bombs: dict[str, Any],
    rate: float,
    skip: frozenset[str] = frozenset(),
) -> None:
    stop = time.monotonic() + seconds
    streams: list[aiohttp.ClientResponse] = []
    stalled: list[socket.socket] = []

    async def loop(address: str, body: Callable[[aiohttp.ClientSession], Awaitable[None]]) -> None:
        # Paced: the attack runs on the same cores as the server; unpaced, it would measure how
        # this machine shares its CPU, not what the server's guards do.
        async with _session(address, jar=body in (churn, callback_churn)) as http:
            while time.monotonic() < stop:
                started = time.monotonic()
                await body(http)
                await asyncio.sleep(max(0.0, 1 / rate - (time.monotonic() - started)))

    async def fresh_identities(http: aiohttp.ClientSession) -> None:
        await _request(
            tally, "submit, new identity", http.post(f"{url}/v1/tts/jobs", json={"text": "Flood."})
        )

    async def churn(http: aiohttp.ClientSession) -> None:
        async with http.post(f"{url}/v1/tts/jobs", json={"text": "Never mind."}) as r:
            tally.add("submit then cancel", r.status)
            job = await r.json() if r.status == 202 else None
        if job:
            await _request(tally, "cancel", http.delete(f"{url}/v1/tts/jobs/{job['id']}"))

    async def open_streams(http: aiohttp.ClientSession) -> None:
        try:
            response = await http.get(f"{url}/v1/events")
            tally.add("event stream", response.status)
            if response.status == 200:
                streams.append(response)
            else:
                response.release()
        except aiohttp.ClientError:
            tally.add("event stream", 0)
        await asyncio.sleep(0.01)

    async def voice_bombs(http: aiohttp.ClientSession) -> None:
        for kind in ("lzma", "long"):
            data = json.dumps(bombs[kind], ensure_ascii=False).encode()
            headers = {"Content-Type": "application/json"}
            call = http.post(f"{url}/v1/voices", data=data, headers=headers)
            await _request(tally, f"voice: {kind}", call)
        form = aiohttp.FormData({"name": "flac", "transcript": "hello"})
        form.add_field("audio", bombs["flac"], filename="a.flac", content_type="audio/flac")
        await _request(tally, "voice: 8-channel flac", http.post(f"{url}/v1/voices", data=form))

    async def digits(http: aiohttp.ClientSession) -> None:
        call = http.post(f"{url}/v1/tts/jobs", json={"text": "1" * 4000})
        await _request(tally, "4,000 digits", call)
        # What it tests is the web tier's normalizing (linear now). Each accepted one is also a
        # long job for the one worker: a flood of them is a backlog, not a guard's failure.
        await asyncio.sleep(1.0)

    async def dropped_characters(http: aiohttp.ClientSession) -> None:
        data = json.dumps(bombs["transcript"], ensure_ascii=False).encode()
        call = http.post(
            f"{url}/v1/voices", data=data, headers={"Content-Type": "application/json"}
        )
        await _request(tally, "voice: 100k-char transcript", call)

    async def callback_churn(http: aiohttp.ClientSession) -> None:
        body = {"text": "Call me, then never mind.", "callback_url": "https://example.com/hook"}
        async with http.post(f"{url}/v1/tts/jobs", json=body) as r:
            tally.add("submit with callback then cancel", r.status)
            job = await r.json() if r.status == 202 else None
        if job:
            await _request(tally, "cancel", http.delete(f"{url}/v1/tts/jobs/{job['id']}"))

    long_job: dict[str, str] = {}

    async def never_read(http: aiohttp.ClientSession) -> None:
        """Downloads of a long job's WAV (MBs) on sockets that take no byte, and its stream
        opened again and again."""
        if not long_job:
            body = {"text": "A long sentence to say, and to download slowly. " * 60, "stream": True}
            async with http.post(f"{url}/v1/tts/jobs", json=body) as r:
                if r.status != 202:
                    tally.add("long job", r.status)
                    await asyncio.sleep(1.0)
                    return
                long_job["id"] = (await r.json())["id"]
        job_id = long_job["id"]
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.bind((ATTACKERS[-1], 0))  # an attacker's address, not the honest client's
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        sock.send(f"GET /v1/tts/jobs/{job_id}/audio HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        stalled.append(sock)
        tally.add("download never read", 1)
        try:
            stream = await http.get(f"{url}/v1/tts/jobs/{job_id}/stream")
            tally.add("audio stream", stream.status)
            if stream.status == 200:
                streams.append(stream)
            else:
                stream.release()
        except aiohttp.ClientError:
            tally.add("audio stream", 0)

    async def cross_site(http: aiohttp.ClientSession) -> None:
        form = aiohttp.FormData({"name": "xsite", "transcript": "hello"})
        call = http.post(f"{url}/v1/voices", data=form, headers={"Origin": EVIL})
        await _request(tally, "cross-site form", call)

    for i in range(20):  # uploads that never finish
        sock = socket.create_connection(("127.0.0.1", port), source_address=(ATTACKERS[i % 8], 0))
        sock.sendall(
            b"POST /v1/voices HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: multipart/form-data; boundary=zz\r\nContent-Length: 9000000\r\n\r\n"
            b'--zz\r\nContent-Disposition: form-data; name="audio"; filename="a.wav"\r\n\r\nRIFF'
        )
        stalled.append(sock)
    for i in range(20):  # urlencoded forms that stop one byte short of their 2 MB
        sock = socket.create_connection(("127.0.0.1", port), source_address=(ATTACKERS[i % 8], 0))
        sock.sendall(
            b"POST /v1/voices HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 2000000\r\n\r\n"
        )
        sock.settimeout(0.2)
        with contextlib.suppress(OSError):  # refused at once: answered and closed unread
            sock.sendall(b"name=x&transcript=" + b"a" * 1_999_000)
        stalled.append(sock)
    plan = [fresh_identities] * 4 + [churn, open_streams, voice_bombs, digits, cross_site]
    plan += [dropped_characters, callback_churn, never_read]
    plan = [body for body in plan if body.__name__ not in skip]
    try:
        await asyncio.gather(*(loop(ATTACKERS[i % 8], body) for i, body in enumerate(plan)))
    finally:
        for response in streams:
            response.close()
        for sock in stalled:
            sock.close()
    tally.stalled = len(stalled)


def _attack_process(
    url: str, port: int, seconds: float, rate: float, skip: frozenset[str], out: Any
) -> None:
    """The attackers, in a process of their own: their load must not slow the honest client's
    own event loop (only the server it shares with them)."""
    tally = Tally()
    asyncio.run(attack(url, port, seconds, tally, _bombs(), rate, skip))
    out.put((dict(tally.counts), tally.stalled))


async def _under_attack(
    url: str, port: int, seconds: float, jobs: int, rate: float, skip: frozenset[str]
) -> tuple[list[float], Tally]:
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    attacker = context.Process(
        target=_attack_process, args=(url, port, seconds, rate, skip, results)
    )
    attacker.start()
    await asyncio.sleep(1.0)  # the attack is on before the honest client starts
    honest_tally = Tally()
    latencies = await honest(url, jobs, honest_tally)
    counts, stalled = await asyncio.to_thread(results.get, True, seconds + 120)
    await asyncio.to_thread(attacker.join, 30)
    tally = Tally()
    tally.counts.update(counts)
    tally.counts.update(honest_tally.counts)
    tally.stalled = stalled
    return latencies, tally


async def _growth_per_request(url: str, store: redis.Redis, count: int) -> tuple[float, float, int]:
    """Redis bytes added per refused request (cross-site, rate-limited) and per job cancelled
    while queued (its record lives CHATTTS_UNSTARTED_TTL_S)."""
    tally = Tally()
    before = int(store.info("memory")["used_memory"])
    async with _session("127.0.0.9") as http:
        for _ in range(count):
            call = http.post(f"{url}/v1/tts/jobs", json={"text": "x"}, headers={"Origin": EVIL})
            await _request(tally, "refused", call)
    refused = (int(store.info("memory")["used_memory"]) - before) / count
    keys = Keys(Settings().key_prefix, Settings().queue)
    held, ttls = 0, []
    async with _session("127.0.0.8", jar=True) as http:
        for i in range(count):
            async with http.post(f"{url}/v1/tts/jobs", json={"text": f"Cancel me {i}."}) as r:
                job = await r.json()
            await _request(tally, "cancel", http.delete(f"{url}/v1/tts/jobs/{job['id']}"))
            # What the job still holds: its record and its own events (MEMORY USAGE, exact).
            for key in (keys.job(job["id"]), keys.job_events(job["id"])):
                held += int(store.memory_usage(key, samples=0) or 0)
                ttls.append(int(store.ttl(key)))
            await asyncio.sleep(0.2)  # within the client's rate
    return refused, held / count, max(ttls)


def measure(args: argparse.Namespace, procs: Processes, tmp: Path) -> dict[str, Any]:
    redis_url = start_redis(procs, tmp)
    shipped = {name: getattr(Settings(), name) for name in LIMITS_OFF}
    url, web = start_ours(procs, redis_url, tmp, **shipped)
    worker = Settings(redis_url=redis_url, engine="espeak", data_dir=str(tmp / "w"))
    env = {**os.environ, **worker.to_env(), "CHATTTS_WORKER_METRICS_PORT": "0"}
    port = int(url.rsplit(":", 1)[1])
    store = redis.Redis.from_url(redis_url)

    async def run() -> dict[str, Any]:
        # No worker yet: the cancelled jobs are cancelled while queued, as the figure means.
        refused_b, cancelled_b, ttl = await _growth_per_request(url, store, args.growth_requests)
        procs.start("ours-worker", [sys.executable, "-m", "cli", "worker"], env, cwd=REPO_ROOT)
        await asyncio.to_thread(wait_http, procs, f"{url}/readyz")
        idle_tally = Tally()
        idle = await honest(url, args.jobs, idle_tally)
        under, tally = await _under_attack(
            url, port, args.seconds, args.jobs, args.attack_rate, frozenset(args.skip)
        )
        counts = tally.counts
        return {
            "requests": {f"{k} -> {s or 'no answer'}": n for (k, s), n in sorted(counts.items())},
            "attack_requests": sum(n for (k, _), n in counts.items() if k != "honest submit"),
            "stalled_uploads": tally.stalled,
            "server_errors": tally.server_errors + idle_tally.server_errors,
            "web_peak_rss_mb": _peak_rss_kb(web.pid) / 1024,
            "web_rss_limit_mb": WEB_LIMIT_KB / 1024,
            "redis_bytes_per_refused_request": refused_b,
            "redis_bytes_per_cancelled_job": cancelled_b,
            "cancelled_job_kept_s": ttl,
            "honest_idle_p50_ms": statistics.median(idle) * 1000,
            "honest_idle_p99_ms": _p99(idle) * 1000,
            "honest_attack_p50_ms": statistics.median(under) * 1000,
            "honest_attack_p99_ms": _p99(under) * 1000,
            "honest_jobs_succeeded": 2 * args.jobs,
            "attack_requests_per_s": sum(n for (k, _), n in counts.items() if k != "honest submit")
            / args.seconds,
        }

    try:
        return asyncio.run(run())
    finally:
        store.close()


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def _peak_rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
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
    p.add_argument("--growth-requests", type=int, default=50, help="requests per growth figure")
    p.add_argument("--quick", action="store_true", help="a smoke run: 5 s, 12 jobs")
    p.add_argument("--output", default=str(REPO_ROOT / "bench" / "results" / "hostile.json"))
    p.add_argument("--keep-logs", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        args.seconds, args.jobs, args.growth_requests = 5.0, 12, 10
    with bench_run("chattts-hostile-", args.keep_logs) as (procs, tmp):
        report = measure(args, procs, tmp)
    for name, value in report.items():
        if name != "requests":
            print(f"{name:48} {value:.1f}" if isinstance(value, float) else f"{name:48} {value}")
    for name, n in report["requests"].items():
        print(f"  {name:60} {n}")
    ratio = report["honest_attack_p99_ms"] / max(1e-9, report["honest_idle_p99_ms"])
    print(f"{'honest p99 under attack / alone':48} {ratio:.2f}x (target <= 2x)")
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps({**report, "p99_ratio": ratio}, indent=2))
    ok = report["server_errors"] == 0 and report["web_peak_rss_mb"] < report["web_rss_limit_mb"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
