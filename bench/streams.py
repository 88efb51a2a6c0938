"""Concurrent streamed speech through the whole service: web, embedded Redis and one chattts
worker on the full-size random-weight architecture. N OpenAI streamed requests (`stream_format:
audio`, pcm) with N different voices are sent at once, for N = 1, 2, 4, 8: audio-seconds per
second of wall time, and time from request to first audio byte (p50, p99), ChatTTS's own loop
(`CHATTTS_RUNTIME=library`) against our runtime with each stream admission (`capacity`, the
default, and `off`), in one run. Writes the figures as JSON and a PNG of the curves against N;
the closing lines compare N at once through our runtime with one request through the library.

    python -m bench.streams [--streams 1,2,4,8] [--tokens 48] [--repeats 2]
        [--admissions capacity,off]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Literal, cast

import aiohttp

from bench.lib import cli, report
from bench.lib.checkpoints import random_checkpoint
from bench.lib.cli import REPO_ROOT
from core.infra.embedded_redis import EmbeddedRedis, free_port
from core.infra.settings import Settings
from core.infra.worker_sections import RuntimeName
from testing.procs import Processes, bench_run

RATE = 24_000
VOICES = (
    *("zh_female", "en_male", "zh_male", "en_female"),
    *("zh_female_2", "zh_male_2", "en_female_2", "en_male_2"),
)
TEXT = "今天天气很好，我们去公园散步吧。"  # one segment; random weights speak the whole budget
READY_TIMEOUT_S = 600.0  # the library path loads, warms up and steps a 1 GB model on a CPU


async def one_request(
    session: aiohttp.ClientSession, url: str, voice: str, seed: int
) -> tuple[float, float]:
    """(seconds to the first audio byte, seconds of audio) of one streamed request."""
    body = {
        "model": "tts-1",
        "input": TEXT,
        "voice": voice,
        "response_format": "pcm",
        "stream_format": "audio",
        "seed": seed,
        "cache": False,
    }
    started = time.perf_counter()
    first: float | None = None
    size = 0
    async with session.post(f"{url}/v1/audio/speech", json=body) as response:
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {await response.text()}")
        async for piece in response.content.iter_any():
            if first is None and piece:
                first = time.perf_counter() - started
            size += len(piece)
    if first is None or size == 0:
        raise RuntimeError("a streamed request returned no audio")
    return first, size / 2 / RATE


async def measure(url: str, streams: int, repeats: int, seed: int) -> dict[str, Any]:
    firsts: list[float] = []
    rates: list[float] = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None)) as session:
        for r in range(repeats):
            started = time.perf_counter()
            done = await asyncio.gather(
                *(
                    one_request(session, url, VOICES[i % len(VOICES)], seed + 100 * r + i)
                    for i in range(streams)
                )
            )
            wall = time.perf_counter() - started
            firsts += [f for f, _ in done]
            rates.append(sum(a for _, a in done) / wall)
    ordered = sorted(firsts)
    return {
        "streams": streams,
        "audio_s_per_s": statistics.median(rates),
        "audio_s_per_s_runs": rates,
        "first_byte_p50_s": statistics.median(ordered),
        "first_byte_p99_s": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
    }


async def wait_ready(url: str, procs: Processes) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            procs.check_alive()
            try:
                async with session.get(f"{url}/readyz") as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.5)
    raise RuntimeError("the service did not become ready")


def run_path(
    runtime: str, admission: str, model: Path, args: argparse.Namespace
) -> list[dict[str, Any]]:
    """The figures of one runtime with one stream admission (the library path has none)."""
    with bench_run(f"chattts-streams-{runtime}-{admission}-", args.keep_logs) as (procs, tmp):
        redis = EmbeddedRedis(tmp / "redis")
        redis.data_dir.mkdir(parents=True, exist_ok=True)
        redis.process = procs.start("redis", redis.command(), tier=0).popen
        redis.wait_ready()
        port = free_port()
        settings = Settings.of(
            redis_url=redis.url,
            engine="chattts",
            device=args.device,
            model_dir=str(model),
            runtime=cast(RuntimeName, runtime),
            max_batch=max(args.streams),
            port=port,
            data_dir=str(tmp / "data"),
            log_level="WARNING",
            stream_admission=cast(Literal["capacity", "off"], admission),
            **({"stream_headroom": args.headroom} if args.headroom else {}),
        )
        env = {**os.environ, **settings.to_env()}
        for name in ("web", "worker"):
            procs.start(name, [sys.executable, "-m", "cli", name], env, cwd=REPO_ROOT)
        url = f"http://127.0.0.1:{port}"
        asyncio.run(wait_ready(url, procs))
        rows = []
        for streams in args.streams:
            row = asyncio.run(measure(url, streams, args.repeats, seed=streams * 1000))
            row["runtime"], row["admission"] = runtime, admission
            rows.append(row)
            print(
                f"{path_name(row):>16} {streams:>2} streams: {row['audio_s_per_s']:.2f} audio-s/s, "
                f"first byte p50 {row['first_byte_p50_s']:.2f} s, "
                f"p99 {row['first_byte_p99_s']:.2f} s",
                flush=True,
            )
        return rows


def path_name(row: dict[str, Any]) -> str:
    return "library" if row["runtime"] == "library" else f"ours ({row['admission']})"


def plot(rows: list[dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    paths = (
        ("library", "ChatTTS's loop", "tab:blue"),
        ("ours (capacity)", "our runtime", "tab:orange"),
        ("ours (off)", "our runtime, admission off", "tab:green"),
    )
    for name, label, color in paths:
        mine = [r for r in rows if path_name(r) == name]
        if not mine:
            continue
        n = [r["streams"] for r in mine]
        left.plot(n, [r["audio_s_per_s"] for r in mine], marker="o", color=color, label=label)
        p50 = [r["first_byte_p50_s"] for r in mine]
        p99 = [r["first_byte_p99_s"] for r in mine]
        right.plot(n, p50, marker="o", color=color, label=f"{label}, p50")
        right.plot(n, p99, marker="x", ls="--", color=color, label=f"{label}, p99")
    left.set(xlabel="concurrent streams", ylabel="audio-seconds per second", title="throughput")
    right.set(xlabel="concurrent streams", ylabel="seconds", title="time to first audio byte")
    right.set_yscale("log")
    for axes in (left, right):
        axes.grid(alpha=0.3)
        axes.legend()
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def comparisons(rows: list[dict[str, Any]]) -> list[str]:
    """N streams at once through our runtime against one request through the library: audio per
    second (the library's one at a time), and first audio against one library request's."""
    by = {(path_name(r), r["streams"]): r for r in rows}
    alone = by.get(("library", 1))
    lines = []
    for (name, n), row in sorted(by.items()):
        if alone is None or name == "library":
            continue
        lines.append(
            f"{name}, {n} at once: {row['audio_s_per_s'] / alone['audio_s_per_s']:.2f}x the "
            f"library one at a time; first audio p50 "
            f"{row['first_byte_p50_s'] / alone['first_byte_p50_s']:.2f} of one library request"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    p = cli.parser(
        "bench.streams", __doc__, output="streams", json_alias=True, repeats=2, logs=True
    )
    p.add_argument("--streams", default="1,2,4,8", type=lambda s: [int(x) for x in s.split(",")])
    p.add_argument("--tokens", type=int, default=48, help="audio tokens per request (48)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--runtimes", default="library,ours", type=lambda s: s.split(","))
    p.add_argument(
        "--admissions",
        default="capacity,off",
        type=lambda s: s.split(","),
        help="stream admissions of our runtime, each in its own service (capacity,off)",
    )
    p.add_argument("--png", default=str(REPO_ROOT / "bench" / "results" / "streams.png"))
    p.add_argument("--size", choices=["full", "tiny"], default="full", help="the architecture")
    p.add_argument(
        "--headroom",
        type=float,
        help="CHATTTS_STREAM_HEADROOM (a large one makes any device one below real time)",
    )
    p.add_argument("--no-png", action="store_true", help="write the figures as JSON only")
    args = p.parse_args(argv)
    model = random_checkpoint(args.size, args.tokens)
    paths = [
        (runtime, admission)
        for runtime in args.runtimes
        for admission in (["off"] if runtime == "library" else args.admissions)
    ]
    rows = [row for path in paths for row in run_path(*path, model, args)]
    where = (
        f"{args.device}, {os.cpu_count()} CPUs, {args.size} random weights, "
        f"{args.tokens} tokens per request"
    )
    report.write_json(args.output, {"where": where, "rows": rows})
    if not args.no_png:
        plot(rows, Path(args.png), f"Streamed speech, one chattts worker ({where})")
    for line in comparisons(rows):
        print(line)
    print(f"wrote {args.output}" + ("" if args.no_png else f" and {args.png}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
