"""What hearing each segment costs through the whole service: a stream's first audio with its
segments sent at once or held until heard (eSpeak NG), and the throughput of best-of-2
candidates in one batch against a retry (ChatTTS on a random-weight checkpoint).

    python -m bench.checks_service [--requests 20] [--size tiny] [--output costs.json]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from typing import Any

import aiohttp

from bench.lib import cli, report
from bench.lib.checkpoints import random_checkpoint
from bench.lib.stack import start_stack
from bench.lib.stats import percentile
from core.infra.settings import Settings
from testing.limits import LIMITS_OFF
from testing.procs import bench_run
from workers.checks.faults import FAULT_AUDIO_ENV

TEXT = (
    "The train to Boston leaves from platform nine at seven o'clock. Please be there ten "
    "minutes early, and bring your ticket with you."
)
ZH_TEXT = "今天天气很好，我们去公园散步吧。"
# A stream's policies, and the service with no recognizer (its signal checked only).
STREAM_CASES: dict[str, dict[str, Any]] = {
    "no recognizer": {"recognizer": "none"},
    "send": {"check_streams": "send"},
    "hold": {"check_streams": "hold"},
}
# Every segment checked and told (no remakes: random weights fail every check), two candidates
# in one batch, and a retry of every segment (its first attempt spoiled, so that it is made again).
BATCH_CASES: dict[str, dict[str, Any]] = {
    "one attempt": {"check_tries": 1},
    "best of 2, one batch": {"check_candidates": 2},
    "a retry": {"check_tries": 2},  # with every first attempt spoiled (FAULT_AUDIO_ENV)
}


async def _first_audio(session: aiohttp.ClientSession, url: str) -> tuple[float, float]:
    """(seconds to the first audio byte, seconds to the last) of one streamed request."""
    body: dict[str, Any] = {"model": "tts-1", "input": TEXT, "voice": "en_female"}
    body |= {"response_format": "pcm", "stream_format": "audio", "cache": False}
    started = time.perf_counter()
    first = None
    async with session.post(f"{url}/v1/audio/speech", json=body) as response:
        assert response.status == 200, await response.text()
        async for chunk in response.content.iter_any():
            if chunk and first is None:
                first = time.perf_counter() - started
    return first or 0.0, time.perf_counter() - started


async def _throughput(url: str, jobs: int) -> float:
    """Jobs per second of `jobs` concurrent ones (not audio: a retry may keep a short attempt)."""
    async with aiohttp.ClientSession() as session:
        started = time.perf_counter()

        async def one(i: int) -> float:
            body = {"text": ZH_TEXT, "voice": "zh_female", "seed": i, "cache": False}
            async with session.post(f"{url}/v1/tts/jobs", json=body) as response:
                job = await response.json()
            while True:
                async with session.get(url + job["status_url"]) as response:
                    state = await response.json()
                if state["state"] in ("succeeded", "failed"):
                    assert state["state"] == "succeeded", state
                    return float(state["duration_s"])
                await asyncio.sleep(0.05)

        await asyncio.gather(*(one(i) for i in range(jobs)))
        return jobs / (time.perf_counter() - started)


def streams(args: argparse.Namespace) -> dict[str, Any]:
    out = {}
    for case, changes in STREAM_CASES.items():
        with bench_run("checks-streams-", args.keep_logs) as (procs, tmp):
            settings = Settings.of(
                engine="espeak", log_level="WARNING", data_dir=str(tmp), **LIMITS_OFF, **changes
            )
            service = start_stack(procs, settings, 1, folder=tmp)

            async def run(url: str = service.url) -> list[tuple[float, float]]:
                async with aiohttp.ClientSession() as session:
                    await _first_audio(session, url)  # warm
                    return [await _first_audio(session, url) for _ in range(args.requests)]

            times = asyncio.run(run())
        firsts, lasts = [1000 * f for f, _ in times], [1000 * last for _, last in times]
        out[case] = {
            "first_audio_ms_p50": round(statistics.median(firsts), 1),
            "first_audio_ms_p95": round(percentile(firsts, 95), 1),
            "whole_ms_p50": round(statistics.median(lasts), 1),
        }
        row = out[case]
        print(
            f"  {case:<14} first audio p50 {row['first_audio_ms_p50']:>7.1f} ms, p95 "
            f"{row['first_audio_ms_p95']:>7.1f} ms; whole {row['whole_ms_p50']:>7.1f} ms",
            flush=True,
        )
    return out


def batches(args: argparse.Namespace) -> dict[str, Any]:
    model = random_checkpoint(args.size, tokens=args.tokens)
    out = {}
    for case, changes in BATCH_CASES.items():
        with bench_run("checks-batches-", args.keep_logs) as (procs, tmp):
            settings = Settings.of(
                engine="chattts", model_dir=str(model), device=args.device, max_batch=args.jobs * 2,
                log_level="WARNING", data_dir=str(tmp), **LIMITS_OFF, **changes,
            )  # fmt: skip
            spoiled = {FAULT_AUDIO_ENV: "short"} if case == "a retry" else {}
            service = start_stack(procs, settings, 1, folder=tmp, environ={**os.environ, **spoiled})
            asyncio.run(_throughput(service.url, 2))  # warm
            rates = [asyncio.run(_throughput(service.url, args.jobs)) for _ in range(args.repeats)]
        out[case] = {"jobs_per_s": round(statistics.median(rates), 3), "runs": rates}
        print(f"  {case:<22} {out[case]['jobs_per_s']:>6.3f} jobs/s", flush=True)
    return out


def main() -> None:
    parser = cli.parser("bench.checks_service", __doc__, output="", repeats=3, logs=True)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--size", default="tiny", choices=("tiny", "full"))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--tokens", type=int, default=None, help="audio tokens per row")
    parser.add_argument("--skip", choices=("streams", "batches"), action="append", default=[])
    args = parser.parse_args()
    figures: dict[str, Any] = {}
    if "streams" not in args.skip:
        print("A stream's first audio, eSpeak NG, one worker, one request at a time:")
        figures["streams"] = streams(args)
    if "batches" not in args.skip:
        print(f"Throughput of {args.jobs} jobs at once, ChatTTS {args.size} random weights:")
        figures["batches"] = batches(args)
    if args.output:
        report.write_json(args.output, figures)


if __name__ == "__main__":
    main()
