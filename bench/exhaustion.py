"""Clients that exhaust what a web process has, with an honest client beside them: descriptors
(headers that never end, multipart bodies that stop short), its event loop (`/tts` forms of
empty fields), the backlog (four addresses flooding it), its threads (three addresses asking
for long documents' subtitles while an honest client downloads), and native encoders (a long
Ogg Vorbis job and document).

    python -m bench.exhaustion [--repo PATH] [--output exhaustion.json]

`--repo` serves the checkout at PATH (another commit's, for a before and after in one run). The
web process starts with the usual soft limit of 1,024 open files, as a service manager gives it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import socket
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import redis

from bench.lib import cli, harness
from bench.lib.stack import raise_nofile, shipped_limits, start_ours, start_redis
from bench.lib.stats import p99, percentile
from core.infra.settings import Settings
from testing.procs import Processes

HEADER_STALLS, BODY_STALLS = 1_100, 100
HOLD_S = 25.0  # past the header deadline (20 s), within aiohttp's keep-alive (75 s)
FLOOD_S, FLOOD_SENDERS = 10.0, 4
BACKLOG, FLOODERS, HONEST_JOBS = 200, 4, 13
BUILDERS, DOCUMENTS_EACH, BUILDS_S = 3, 1, 30.0
SUBTITLE_FORMATS = ("srt", "vtt", "json")
# About 100,000 characters of short sentences: a document of 1,400 cues and about 2 hours of speech.
SUBTITLED_TEXT = " ".join(
    f"Sentence {n} of the long document, read aloud, then timed as a subtitle."
    for n in range(1_400)
)
# Mandarin at half speed, in segments of 200 characters: about 240 s of speech.
LONG_TEXT = (
    "。".join(["今天天气很好，我们一起去公园散步，看看花草树木，听听鸟儿唱歌" * 3] * 3) + "。"
)


async def _healthz_ms(http: aiohttp.ClientSession, url: str) -> float:
    started = time.monotonic()
    try:
        async with http.get(f"{url}/healthz", timeout=aiohttp.ClientTimeout(total=10)) as r:
            await r.read()
            ok = r.status == 200
    except (aiohttp.ClientError, TimeoutError):
        ok = False
    return (time.monotonic() - started) * 1000 if ok else 10_000.0


async def _honest_while(url: str, seconds: float) -> list[float]:
    """/healthz ten times a second from 127.0.0.1 for `seconds`, each on a fresh connection."""
    out: list[float] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        async with aiohttp.ClientSession() as http:
            out.append(await _healthz_ms(http, url))
        await asyncio.sleep(0.1)
    return out


def _open_stalls(port: int) -> tuple[list[socket.socket], int]:
    """Header stalls from 127.0.0.2 and multipart stalls from 127.0.0.3; those refused."""
    held, refused = [], 0
    head = b"GET /v1/live HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
    form = (
        b"POST /tts HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: multipart/form-data; "
        b"boundary=zz\r\nContent-Length: 1800000\r\n\r\n--zz\r\n" + b"x" * 1024
    )
    for n in range(HEADER_STALLS + BODY_STALLS):
        source, payload = ("127.0.0.2", head) if n < HEADER_STALLS else ("127.0.0.3", form)
        try:
            sock = socket.create_connection(("127.0.0.1", port), 5, (source, 0))
            sock.sendall(payload)
            held.append(sock)
        except OSError:
            refused += 1
    return held, refused


def _still_open(socks: list[socket.socket]) -> int:
    """The sockets the server has not closed (what it sent before closing is read past)."""
    count = 0
    for sock in socks:
        sock.setblocking(False)
        try:
            while sock.recv(65536):
                pass
        except BlockingIOError:
            count += 1  # nothing more to read, and no end: still open
        except OSError:
            pass
    return count


async def stalls(url: str) -> dict[str, Any]:
    port = int(url.rsplit(":", 1)[1])
    socks, refused = await asyncio.to_thread(_open_stalls, port)
    try:
        honest = await _honest_while(url, HOLD_S)
        held = await asyncio.to_thread(_still_open, socks)
    finally:
        for sock in socks:
            sock.close()
    return {
        "stalls_opened": len(socks),
        "stalls_refused_at_connect": refused,
        f"stalls_still_open_after_{HOLD_S:.0f}s": held,
        "honest_healthz_p50_ms": round(percentile(honest, 50), 1),
        "honest_healthz_p99_ms": round(p99(honest), 1),
        "honest_failed": sum(ms >= 10_000 for ms in honest),
        "honest_tried": len(honest),
    }


async def form_flood(url: str) -> dict[str, Any]:
    body = b"&" * (2 * 1024 * 1024)
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    sent = 0

    async def sender(n: int) -> None:
        nonlocal sent
        connector = aiohttp.TCPConnector(local_addr=(f"127.0.0.{10 + n}", 0))
        async with aiohttp.ClientSession(connector=connector) as http:
            deadline = time.monotonic() + FLOOD_S
            while time.monotonic() < deadline:
                try:
                    async with http.post(f"{url}/tts", data=body, headers=headers) as r:
                        await r.read()
                except aiohttp.ClientError:
                    pass
                sent += 1

    senders = [asyncio.create_task(sender(n)) for n in range(FLOOD_SENDERS)]
    honest = await _honest_while(url, FLOOD_S)
    await asyncio.gather(*senders)
    return {
        "forms_sent": sent,
        "honest_healthz_p50_ms": round(percentile(honest, 50), 1),
        "honest_healthz_p99_ms": round(p99(honest), 1),
    }


async def backlog(url: str) -> dict[str, Any]:
    """Four addresses submit as fast as they are taken until refused; then an honest one."""
    job = {"text": "One of the flood.", "voice": "en_female", "cache": False}

    async def flood(n: int) -> int:
        connector = aiohttp.TCPConnector(local_addr=(f"127.0.0.{20 + n}", 0))
        taken = 0
        async with aiohttp.ClientSession(connector=connector) as http:
            for _ in range(BACKLOG):
                async with http.post(f"{url}/v1/tts/jobs", json=job) as r:
                    taken += r.status == 202
        return taken

    taken = await asyncio.gather(*(flood(n) for n in range(FLOODERS)))
    refused = 0
    connector = aiohttp.TCPConnector(local_addr=("127.0.0.30", 0))
    async with aiohttp.ClientSession(connector=connector) as http:
        for _ in range(HONEST_JOBS):
            async with http.post(f"{url}/v1/tts/jobs", json=job) as r:
                refused += r.status != 202
    return {"flood_taken": sum(taken), "honest_refused": refused, "honest_tried": HONEST_JOBS}


async def _submit(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> str:
    async with http.post(f"{url}/v1/tts/jobs", json=body) as r:
        answer = await r.json()
        if r.status != 202:
            raise RuntimeError(f"the Vorbis job was refused: {r.status} {answer}")
        return str(answer["id"])


async def vorbis(url: str) -> dict[str, Any]:
    """A long Vorbis document's first part fetched again and again, then a long Ogg Vorbis job:
    crashes of the web and worker processes."""
    job = {"text": LONG_TEXT, "voice": "zh_female", "format": "ogg", "speed": 0.5, "cache": False}
    document = {**job, "text": LONG_TEXT * 16}  # past 4,000 characters: a document
    state, fetched = "", 0
    async with aiohttp.ClientSession() as http:
        part = f"{url}/v1/tts/jobs/{await _submit(http, url, document)}/segments/1"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and fetched < 5:
            try:
                async with http.get(part) as r:
                    await r.read()
                    fetched += r.status == 200
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(2)
        try:
            status = f"{url}/v1/tts/jobs/{await _submit(http, url, job)}"
        except aiohttp.ClientError:
            return {"document_part_fetched": fetched, "long_job": "web process down"}
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and state not in ("succeeded", "failed", "dead"):
            try:
                async with http.get(status) as r:
                    state = (await r.json())["state"]
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(2)
    return {"document_part_fetched": fetched, "long_job": state}


async def _finished(http: aiohttp.ClientSession, url: str, job_id: str, within: float) -> str:
    state, deadline = "", time.monotonic() + within
    while time.monotonic() < deadline and state not in ("succeeded", "failed", "dead"):
        async with http.get(f"{url}/v1/tts/jobs/{job_id}") as r:
            state = (await r.json())["state"]
        await asyncio.sleep(0.5)
    return state


async def _download_ms(http: aiohttp.ClientSession, audio: str) -> float:
    started = time.monotonic()
    async with http.get(audio, timeout=aiohttp.ClientTimeout(total=30)) as r:
        await r.read()
        ok = r.status == 200
    return (time.monotonic() - started) * 1000 if ok else 30_000.0


async def subtitle_builds(url: str) -> dict[str, Any]:
    """Three addresses keep two subtitle builds each in flight (each of a document of its own
    that nobody asked for before) while an honest client downloads a short job's audio."""
    async with aiohttp.ClientSession() as http:
        honest = await _submit(http, url, {"text": "An honest download.", "voice": "en_male"})
        documents = [
            await _submit(http, url, {"text": f"{n}. {SUBTITLED_TEXT}", "voice": "en_female"})
            for n in range(BUILDERS * DOCUMENTS_EACH)
        ]
        states = [await _finished(http, url, job, 600) for job in [honest, *documents]]
        if set(states) != {"succeeded"}:
            raise RuntimeError(f"the subtitled documents were not made: {states}")
        audio = f"{url}/v1/tts/jobs/{honest}/audio"
        alone = [await _download_ms(http, audio) for _ in range(20)]
    built: list[float] = []
    deadline = time.monotonic() + BUILDS_S

    async def builder(n: int) -> None:
        mine = documents[n * DOCUMENTS_EACH : (n + 1) * DOCUMENTS_EACH]
        wanted = [
            f"{url}/v1/tts/jobs/{job}/subtitles?format={f}"
            for job in mine
            for f in SUBTITLE_FORMATS
        ]
        connector = aiohttp.TCPConnector(local_addr=(f"127.0.0.{40 + n}", 0))
        async with aiohttp.ClientSession(connector=connector) as http:

            async def one_at_a_time() -> None:
                while wanted and time.monotonic() < deadline:
                    path, started = wanted.pop(), time.monotonic()
                    async with http.get(path) as r:
                        await r.read()
                    if r.status == 200:
                        built.append(time.monotonic() - started)
                    else:  # refused (too many builds at once): asked again
                        wanted.append(path)
                        await asyncio.sleep(0.05)

            await asyncio.gather(one_at_a_time(), one_at_a_time())

    builders = [asyncio.create_task(builder(n)) for n in range(BUILDERS)]
    downloads: list[float] = []
    async with aiohttp.ClientSession() as http:
        while not all(b.done() for b in builders):
            downloads.append(await _download_ms(http, audio))
            await asyncio.sleep(0.1)
    await asyncio.gather(*builders)
    return {
        "builds_made": len(built),
        "build_s_p50": round(percentile(built, 50), 2) if built else None,
        "honest_download_alone_p50_ms": round(percentile(alone, 50), 1),
        "honest_download_p50_ms": round(percentile(downloads, 50), 1),
        "honest_download_p99_ms": round(p99(downloads), 1),
        "honest_download_max_ms": round(max(downloads), 1),
        "honest_downloads": len(downloads),
    }


def measure(args: argparse.Namespace, procs: Processes, tmp: Path) -> dict[str, Any]:
    raise_nofile(8192)
    repo = Path(args.repo).resolve()
    redis_url = start_redis(procs, tmp)
    # The web process starts with the soft limit a service manager gives (it raises it, or not).
    files = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, files[1]))
    try:
        url = start_ours(
            procs,
            redis_url,
            tmp,
            repo=repo,
            **shipped_limits(),
            max_backlog=BACKLOG,
            submit_rate_per_client=0,
            submit_rate_per_address=0,
        ).url
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, files)
    out: dict[str, Any] = {"repo": str(repo)}
    for name, phase in (("stalls", stalls), ("form_flood", form_flood), ("backlog", backlog)):
        out[name] = asyncio.run(phase(url))
        print(name, out[name], file=sys.stderr, flush=True)
    redis.Redis.from_url(redis_url).flushall()  # the flood's jobs gone: the backlog is empty
    # Unheard (no recognizer): the documents of the subtitle builds are made in a minute.
    worker = Settings.of(
        redis_url=redis_url, engine="espeak", data_dir=str(tmp / "w"), recognizer="none"
    )
    env = {**os.environ, **worker.to_env(), "CHATTTS_WORKER_METRICS_PORT": "0"}
    procs.start("worker", [sys.executable, "-m", "cli", "worker"], env, cwd=repo)
    out["subtitle_builds"] = asyncio.run(subtitle_builds(url))
    print("subtitle_builds", out["subtitle_builds"], file=sys.stderr, flush=True)
    out["vorbis"] = asyncio.run(vorbis(url))
    out["vorbis"]["crashed"] = {p.name: p.popen.returncode for p in procs.procs if not p.alive()}
    return out


def main() -> int:
    p = cli.parser("bench.exhaustion", __doc__, output="", logs=True, checkout=True)
    return harness.run("exhaustion-", p.parse_args(), measure)


if __name__ == "__main__":
    sys.exit(main())
