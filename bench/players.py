"""Streams that never gap: N simulated listeners on one ChatTTS worker (the tiny architecture, or
with `--size full` the full-size one, on this machine's CPU), with streams admitted by measured
capacity and without, in one run; and the time to first audio of a new stream while a document
runs on the same worker.

Each listener sends an OpenAI streamed request (`stream_format: audio`, pcm), starts playing at
its first byte, plays at 1x, and counts underruns: the seconds it had nothing to play before its
stream ended. N goes from 1 to twice the capacity the worker measured (read from /readyz), or
`--listeners`. Targets: every admitted stream under 100 ms of underrun in all, the streams beyond
the capacity starting later (with a lead) instead of every stream gapping, and the audio made
per second at least 90% of what it is without admission; a new stream's first audio beside a
document at most 1.5x its first audio alone.

    python -m bench.players [--quick] [--size tiny|full] [--tokens 256] [--slots 48]
        [--listeners 8] [--output PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Literal, cast

import aiohttp

from bench.batching import missing
from bench.lib import cli, report
from bench.lib.checkpoints import random_checkpoint
from bench.lib.playback import underrun
from bench.lib.report import Row
from bench.lib.stack import start_stack
from core.infra.settings import Settings
from testing.limits import LIMITS_OFF
from testing.procs import bench_run

RATE = 24_000
SECTION = "8. streams"
GAP_FREE_S = 0.1  # the target: under 100 ms of underrun in all, per admitted stream
MIXED_TARGET = 1.5
THROUGHPUT_TARGET = 0.9  # audio per second with admission, of what it is without
TEXT = "今天天气很好，我们去公园散步吧。"  # one segment; the endless checkpoint speaks its budget
DOCUMENT = "今天天气很好，我们去公园散步吧。" * 300  # past 4000 characters: a document


async def listen(session: aiohttp.ClientSession, url: str, seed: int) -> dict[str, float]:
    body = {
        "model": "tts-1",
        "input": TEXT,
        "voice": "zh_female",
        "response_format": "pcm",
        "stream_format": "audio",
        "seed": seed,
        "cache": False,
    }
    started = time.perf_counter()
    arrivals: list[tuple[float, float]] = []
    async with session.post(f"{url}/v1/audio/speech", json=body) as response:
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {await response.text()}")
        async for piece in response.content.iter_any():
            if piece:
                arrivals.append((time.perf_counter(), len(piece) / 2 / RATE))
    if not arrivals:
        raise RuntimeError("a stream brought no audio")
    return {
        "first_audio_s": arrivals[0][0] - started,
        "underrun_s": underrun(arrivals),
        "audio_s": sum(s for _, s in arrivals),
    }


async def readyz(url: str) -> dict[str, Any]:
    async with aiohttp.ClientSession() as session, session.get(f"{url}/readyz") as response:
        return dict(await response.json())


async def players(url: str, n: int, seed: int) -> dict[str, Any]:
    timeout = aiohttp.ClientTimeout(total=None)
    started = time.perf_counter()
    async with aiohttp.ClientSession(timeout=timeout) as session:
        heard = await asyncio.gather(*(listen(session, url, seed + i) for i in range(n)))
    wall = time.perf_counter() - started
    underruns = [h["underrun_s"] for h in heard]
    firsts = sorted(h["first_audio_s"] for h in heard)
    return {
        "streams": n,
        "gap_free": sum(u < GAP_FREE_S for u in underruns),
        "underrun_total_s": round(sum(underruns), 3),
        "underrun_max_s": round(max(underruns), 3),
        "first_audio_p50_s": round(statistics.median(firsts), 3),
        "first_audio_max_s": round(firsts[-1], 3),
        "audio_s_per_s": round(sum(h["audio_s"] for h in heard) / wall, 3),
    }


async def warm(url: str, slots: int) -> int:
    """Run the worker at every slot (jobs nobody listens to), so that it has measured its
    steps at full batch; its capacity then."""
    async with aiohttp.ClientSession() as session:
        ids = []
        for i in range(slots):
            body = {"text": TEXT, "voice": "zh_female", "seed": i, "cache": False}
            async with session.post(f"{url}/v1/tts/jobs", json=body) as response:
                ids.append((await response.json())["id"])
        for job_id in ids:
            while True:
                async with session.get(f"{url}/v1/tts/jobs/{job_id}") as response:
                    if (await response.json())["state"] in ("succeeded", "failed"):
                        break
                await asyncio.sleep(0.2)
    await asyncio.sleep(2.5)  # a heartbeat with the capacity after the run
    return int((await readyz(url))["streams"]["capacity"])


async def mixed(url: str, repeats: int) -> dict[str, float]:
    """First audio of a new stream alone, then while a document runs on the same worker."""
    timeout = aiohttp.ClientTimeout(total=None)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        alone = [(await listen(session, url, 500 + i))["first_audio_s"] for i in range(repeats)]
        body = {"text": DOCUMENT, "voice": "zh_male", "seed": 1, "cache": False}
        async with session.post(f"{url}/v1/tts/jobs", json=body) as response:
            if response.status != 202:
                raise RuntimeError(f"document: HTTP {response.status}: {await response.text()}")
            document = (await response.json())["id"]
        while True:  # the document is running: its first parts are stored
            async with session.get(f"{url}/v1/tts/jobs/{document}") as response:
                if (await response.json()).get("segments_done", 0) >= 1:
                    break
            await asyncio.sleep(0.05)
        beside = [(await listen(session, url, 600 + i))["first_audio_s"] for i in range(repeats)]
        async with session.delete(f"{url}/v1/tts/jobs/{document}"):
            pass
    ratio = statistics.median(beside) / statistics.median(alone)
    return {
        "alone_p50_ms": round(1000 * statistics.median(alone), 1),
        "beside_document_p50_ms": round(1000 * statistics.median(beside), 1),
        "ratio": round(ratio, 2),
    }


def settings_for(tmp: Path, tag: str, args: argparse.Namespace) -> Settings:
    """The stack of one admission (`tag`): one worker of `args.slots` rows."""
    return Settings.of(
        host="127.0.0.1",
        data_dir=str(tmp / tag / "data"),
        audio_store=f"file://{tmp / tag / 'audio'}",
        engine="chattts",
        device="cpu",
        model_dir=str(args.model),
        max_batch=args.slots,
        log_level="WARNING",
        heartbeat_s=1.0,  # the capacity read from /readyz is a second old at most
        stream_admission=cast(Literal["capacity", "off"], tag),
    ).replace(**LIMITS_OFF)


def rows(report: dict[str, Any]) -> list[Row]:
    out = []
    by_n = {r["streams"]: r for r in report["off"]}
    for row in report["capacity"]:
        n, cap = row["streams"], report["capacity_streams"]
        admitted = min(n, cap)
        out.append(
            Row(
                SECTION,
                f"streams gap-free of {n} listeners (capacity {cap}), tiny ChatTTS on this CPU",
                row["gap_free"],
                "streams",
                by_n.get(n, {}).get("gap_free"),
                f">= {admitted} (the admitted ones)",
                row["gap_free"] >= admitted,
            )
        )
    if report["capacity"] and report["off"]:
        most = report["capacity"][-1]
        without = by_n.get(most["streams"], {}).get("audio_s_per_s")
        ratio = round(most["audio_s_per_s"] / without, 2) if without else 0.0
        out.append(
            Row(
                SECTION,
                f"audio per second of {most['streams']} listeners, with admission / without",
                ratio,
                "ratio",
                None,
                f">= {THROUGHPUT_TARGET}",
                ratio >= THROUGHPUT_TARGET,
            )
        )
    if "mixed" in report:
        m = report["mixed"]
        out.append(
            Row(
                SECTION,
                "first audio of a new stream beside a document / alone",
                m["ratio"],
                "ratio",
                None,
                f"<= {MIXED_TARGET}",
                m["ratio"] <= MIXED_TARGET,
            )
        )
    return out


def main(argv: list[str] | None = None) -> int:
    p = cli.parser(
        "bench.players", __doc__, quick="shorter streams, fewer slots", output="players", logs=True
    )
    p.add_argument("--tokens", type=int, default=256, help="audio tokens a stream (256: 5.5 s)")
    p.add_argument("--slots", type=int, default=48, help="the worker's rows (CHATTTS_MAX_BATCH)")
    p.add_argument("--repeats", type=int, default=1, help="(the suite's; each N runs once)")
    p.add_argument("--size", choices=["tiny", "full"], default="tiny", help="the architecture")
    p.add_argument(
        "--listeners",
        type=lambda v: [int(x) for x in v.split(",")],
        help="the counts of listeners (default: 1 to twice the measured capacity)",
    )
    p.add_argument("--no-mixed", action="store_true", help="skip the stream beside a document")
    args = p.parse_args(argv)
    if args.quick:
        args.tokens, args.slots = 128, 16
    why = missing()
    if why is not None:
        report.write(Path(args.output), [], {}, skipped=why)
        print(f"players skipped: {why}")
        return 0
    args.model = random_checkpoint(args.size, args.tokens)
    where = f"{os.cpu_count()} CPUs, {args.size} random weights, {args.tokens} tokens a stream"
    figures: dict[str, Any] = {"where": where}
    with bench_run("chattts-players-", args.keep_logs) as (procs, tmp):
        url = start_stack(
            procs, settings_for(tmp, "capacity", args), 1, folder=tmp / "capacity", tag="capacity"
        ).url
        capacity = max(1, asyncio.run(warm(url, args.slots)))
        figures["capacity_streams"] = capacity
        counts = args.listeners or sorted(
            {1, max(1, capacity // 2), capacity, capacity * 3 // 2, 2 * capacity}
        )
        print(f"measured capacity: {capacity} streams; listeners: {counts}", flush=True)
        for mode in ("capacity", "off"):
            if mode == "off":
                procs.stop_all()
                url = start_stack(
                    procs, settings_for(tmp, mode, args), 1, folder=tmp / mode, tag=mode
                ).url
                asyncio.run(warm(url, args.slots))
            figures[mode] = []
            for n in counts:
                row = asyncio.run(players(url, n, seed=1000 * n))
                figures[mode].append(row)
                print(f"{mode:>8} {json.dumps(row)}", flush=True)
            if mode == "capacity" and not args.no_mixed:
                figures["mixed"] = asyncio.run(mixed(url, 5))
                print(f"   mixed {json.dumps(figures['mixed'])}", flush=True)
    figures["rows"] = [row.to_json() for row in rows(figures)]
    report.write_json(args.output, figures)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
