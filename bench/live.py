"""Live sessions against what clients do today: N simulated LLMs write answers of a few sentences
token by token (30-100 tokens/s each), spoken through the whole service (Redis, web, one worker)
three ways side by side: `whole` (one OpenAI streamed request after the last token),
`per-sentence` (one streamed request per sentence as it ends, played in order) and `live` (our
`/v1/live` session, text token by token, `close` at the end); and the reference, the first
sentence alone as one streamed request.

Each listener starts playing at its first audio byte, at 1x (24 kHz 16-bit mono). Per mode and N:
first audio after the first sentence's last token (p50/p95), underrun per session (the silence
heard after playback started; p50/p95/max), the last audio byte after the last token (p50/p95);
for `live`, a barge-in phase: `clear` while audio plays, ms until the `cleared` frame or the
old text's last audio frame, whichever is later (p95). N goes from 1 to twice the worker's stream
capacity (read from /readyz after a warm-up), or `--sessions`. Targets: live's first-audio p95 at
most 1.5x the reference's, underrun under 100 ms per session within capacity, barge-in p95 under
100 ms.

    python -m bench.live [--engine espeak,chattts] [--size tiny|full] [--device cpu|cuda]
        [--sessions 1,2,4,8] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench import live_modes, live_report
from bench.batching import missing
from bench.lib import cli
from bench.lib.checkpoints import random_checkpoint
from bench.lib.identities import COOKIE_SECRET
from bench.lib.report import write_json
from bench.lib.stack import start_stack
from bench.live_modes import Heard
from bench.live_text import Answer, answers
from bench.players import warm
from core.infra.settings import Settings
from testing.limits import LIMITS_OFF
from testing.procs import bench_run

VOICES = ("en_female", "en_male", "en_female_2", "en_male_2")
LEAD_S = 0.2  # between setting a round up and its clocks' zero
BARGE_DELAY_S = (0.0, 0.1)  # `clear` this long after the first audio (drawn per session)
HTTP_MODES = {
    "reference": live_modes.reference,
    "whole": live_modes.whole,
    "per-sentence": live_modes.per_sentence,
}

Mode = Callable[[str, Answer, str, int, float], Awaitable[Heard]]


def seed_of(mode: str, n: int, i: int) -> int:
    """A seed per mode, round and session: no mode is answered from another's cached audio."""
    return 1_000_000 * (1 + list(HTTP_MODES).index(mode) if mode in HTTP_MODES else 9) + 100 * n + i


async def http_round(url: str, mode: str, said: list[Answer]) -> list[dict[str, float]]:
    run: Mode = HTTP_MODES[mode]
    start = time.perf_counter() + LEAD_S
    n = len(said)
    heard = await asyncio.gather(
        *(
            run(url, a, VOICES[i % len(VOICES)], seed_of(mode, n, i), start)
            for i, a in enumerate(said)
        )
    )
    return [h.figures() for h in heard]


async def live_round(url: str, said: list[Answer]) -> list[dict[str, float]]:
    async with contextlib.AsyncExitStack() as stack:
        sockets = [  # every context open before the clocks start together
            await stack.enter_async_context(
                live_modes.live_socket(url, VOICES[i % len(VOICES)], seed_of("live", len(said), i))
            )
            for i in range(len(said))
        ]
        start = time.perf_counter() + LEAD_S
        heard = await asyncio.gather(
            *(live_modes.live(s, a, start) for s, a in zip(sockets, said, strict=True))
        )
    return [h.figures() for h in heard]


async def barge_round(url: str, said: list[Answer], seed: int) -> list[dict[str, float]]:
    rng = random.Random(seed)
    delays = [rng.uniform(*BARGE_DELAY_S) for _ in said]

    async def one(i: int, answer: Answer) -> dict[str, float]:
        voice, seed = VOICES[i % len(VOICES)], seed_of("barge", len(said), i)
        async with live_modes.live_socket(url, voice, seed) as socket:
            return await live_modes.barge_in(socket, answer, delays[i])

    return list(await asyncio.gather(*(one(i, a) for i, a in enumerate(said))))


async def measure_n(url: str, n: int, seed: int) -> dict[str, Any]:
    """Every mode at N sessions, one after the other, the same answers."""
    said = answers(seed, n)
    out: dict[str, Any] = {"sessions": n}
    for mode in HTTP_MODES:
        out[mode] = live_report.summarize(await http_round(url, mode, said))
    out["live"] = live_report.summarize(await live_round(url, said))
    out["barge-in"] = live_report.summarize(await barge_round(url, said, seed + n))
    return out


async def warm_up(url: str, slots: int, seed: int) -> int:
    """The worker run at every slot, a live session and a request of each mode discarded; the
    capacity the worker measured."""
    capacity = await warm(url, slots)
    said = answers(seed + 7, 1)
    await http_round(url, "reference", said)
    await live_round(url, said)
    return capacity


def settings_for(engine: str, tmp: Path, args: argparse.Namespace) -> Settings:
    """One worker of `engine` (chattts: the random checkpoint, `args.slots` rows on
    `args.device`); limits off: the bench's users are one address."""
    extra: dict[str, Any] = {}
    if engine == "chattts":
        extra = {"device": args.device, "model_dir": str(args.model), "max_batch": args.slots}
    return Settings.of(
        host="127.0.0.1",
        data_dir=str(tmp / engine / "data"),
        audio_store=f"file://{tmp / engine / 'audio'}",
        engine=engine,
        log_level="WARNING",
        heartbeat_s=1.0,  # the capacity read from /readyz is a second old at most
        cookie_secret=COOKIE_SECRET,  # each simulated user is an identity of its own
        max_active_per_client=1_000_000,
        max_backlog=1_000_000,
        max_backlog_per_owner=0,
        **extra,
    ).replace(**LIMITS_OFF, live_sessions_per_address=0)


def run_engine(engine: str, args: argparse.Namespace) -> dict[str, Any]:
    report: dict[str, Any] = {"engine": engine}
    with bench_run(f"chattts-live-{engine}-", args.keep_logs) as (procs, tmp):
        url = start_stack(procs, settings_for(engine, tmp, args), 1, folder=tmp / engine).url
        slots = args.slots if engine == "chattts" else 2
        capacity = max(1, asyncio.run(warm_up(url, slots, args.seed)))
        counts = args.sessions or sorted(
            {1, max(1, capacity // 2), capacity, capacity * 3 // 2, 2 * capacity}
        )
        report |= {"capacity_streams": capacity, "counts": counts, "rounds": []}
        print(f"{engine}: measured capacity {capacity} streams; sessions {counts}", flush=True)
        for n in counts:
            row = asyncio.run(measure_n(url, n, args.seed))
            report["rounds"].append(row)
            print(live_report.brief(engine, row), flush=True)
    return report


def main(argv: list[str] | None = None) -> int:
    p = cli.parser(
        "bench.live", __doc__, quick="N = 1, 2 on eSpeak NG only", output="live", json_alias=True,
        logs=True,
    )  # fmt: skip
    p.add_argument("--engine", default="espeak,chattts", type=lambda v: v.split(","))
    p.add_argument("--size", choices=["tiny", "full"], default="tiny", help="ChatTTS's weights")
    p.add_argument("--tokens", type=int, default=128, help="ChatTTS audio tokens a segment")
    p.add_argument("--slots", type=int, default=16, help="ChatTTS rows (CHATTTS_MAX_BATCH)")
    p.add_argument("--device", default="cpu", help="ChatTTS's device (CHATTTS_DEVICE): cpu, cuda")
    p.add_argument(
        "--sessions",
        type=lambda v: [int(x) for x in v.split(",")],
        help="the counts of sessions (default: 1 to twice the measured capacity)",
    )
    p.add_argument("--seed", type=int, default=7, help="of the answers and their rates")
    args = p.parse_args(argv)
    if args.quick:
        args.engine, args.sessions = ["espeak"], args.sessions or [1, 2]
    report: dict[str, Any] = {
        "where": f"{os.cpu_count()} CPUs",
        "device": args.device,
        "engines": {},
        "engines_skipped": {},
    }
    for engine in args.engine:
        if engine == "chattts":
            why = missing()
            if why is not None:
                report["engines_skipped"][engine] = why
                print(f"chattts skipped: {why}")
                continue
            args.model = random_checkpoint(args.size, args.tokens)
            report["chattts"] = (
                f"{args.size} random weights, {args.tokens} tokens a segment, on {args.device}"
            )
        report["engines"][engine] = run_engine(engine, args)
    report["rows"] = [row.to_json() for row in live_report.rows(report)]
    print(live_report.table(report))
    write_json(args.output, report)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
