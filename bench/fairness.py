"""Who goes first: interactive clients' short jobs while one client floods the queue with documents.

`python -m bench.fairness [--orders fifo fair] [--workers 1 2] [--seconds S] [--documents N]
[--sentences M] [--repeats R] [--quick]` (section 7 of `make bench`): embedded Redis, one web
process, eSpeak NG workers, the audio on disk; four API-key clients. For each scheduler
(CHATTTS_SCHEDULER: first come first served, and fair share) and each number of workers, on a
fresh stack, three phases:
- alone: three interactive clients each submit a short sentence every `--gap` seconds;
- bulk alone: the bulk client submits `--documents` documents of `--sentences` sentences;
- flood: the bulk client's documents again, and 0.5 s later the interactive clients as alone.
Completion is the `succeeded` event on each client's own event stream (no polling). Reports the
interactive completion p50/p99 alone and under the flood (target: p99 under the flood at most
3x alone, or 100 ms), and the bulk client's time for its documents alone and beside the light
interactive load (target: throughput at least 90% of alone). Both orders run in one run, so
that their figures compare on the same machine at the same time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Literal, cast

import aiohttp

from bench.lib import cli, report
from bench.lib.report import Row
from bench.lib.stack import start_stack
from bench.lib.stats import p99
from cli.sse import sse_events
from core.infra.settings import Settings
from testing.limits import LIMITS_OFF
from testing.procs import bench_run

BULK = "bulk-key"
INTERACTIVE = ("alice-key", "bob-key", "carol-key")
SHORT = "A short answer, please."
P99_FLOOR_S = 0.1  # the target's floor: within 3x alone, or 100 ms, whichever is larger
SECTION = "7. fair share"
BULK_RATIO_TARGET = 0.9  # the bulk client keeps 90% of its throughput beside light interactive work


def document_text(sentences: int, n: int) -> str:
    """A document of `sentences` distinct sentences (distinct: the result cache never answers)."""
    return " ".join(f"Document {n}, sentence {i}, read aloud at length." for i in range(sentences))


class Client:
    """One API-key client: its own event stream, and when each of its jobs was submitted."""

    def __init__(self, http: aiohttp.ClientSession, url: str, key: str) -> None:
        self.http, self.url, self.key = http, url, key
        self.headers = {"Authorization": f"Bearer {key}"}
        self.submitted: dict[str, float] = {}
        self.done: dict[str, float] = {}
        self.failed: list[str] = []
        self._follow: asyncio.Task[None] | None = None
        self._listening = asyncio.Event()

    async def __aenter__(self) -> Client:
        self._follow = asyncio.create_task(self._events())
        await asyncio.wait_for(self._listening.wait(), 30)
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._follow is not None:
            self._follow.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._follow

    async def _events(self) -> None:
        async with self.http.get(f"{self.url}/v1/events", headers=self.headers) as response:
            response.raise_for_status()
            self._listening.set()
            async for event in sse_events(response):
                if event.event not in ("succeeded", "failed", "dead", "cancelled"):
                    continue
                job_id = event.json()["job"]["id"]
                self.done[job_id] = time.perf_counter()
                if event.event != "succeeded":
                    self.failed.append(job_id)

    async def submit(self, body: dict[str, Any]) -> str:
        started = time.perf_counter()
        async with self.http.post(
            f"{self.url}/v1/tts/jobs", json=body, headers=self.headers
        ) as answer:
            job = await answer.json()
            if answer.status != 202:
                raise RuntimeError(f"{self.key} was refused: {answer.status} {job}")
        self.submitted[job["id"]] = started
        return str(job["id"])

    async def wait(self, ids: list[str], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not all(i in self.done for i in ids):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.key}: jobs still unfinished after {timeout:.0f} s")
            await asyncio.sleep(0.05)
        if self.failed:
            raise RuntimeError(f"{self.key}: jobs ended badly: {self.failed[:3]}")

    def latencies(self, ids: list[str]) -> list[float]:
        return [self.done[i] - self.submitted[i] for i in ids]


async def interactive(clients: list[Client], seconds: float, gap: float) -> list[float]:
    """Each client submits SHORT every `gap` seconds for `seconds`: completion latencies."""

    async def one(client: Client, offset: float) -> list[str]:
        await asyncio.sleep(offset)
        ids, stop = [], time.monotonic() + seconds
        while time.monotonic() < stop:
            ids.append(await client.submit({"text": SHORT, "voice": "en_female"}))
            await asyncio.sleep(gap)
        return ids

    spread = gap / len(clients)
    runs = await asyncio.gather(*(one(c, i * spread) for i, c in enumerate(clients)))
    latencies: list[float] = []
    for client, ids in zip(clients, runs, strict=True):
        await client.wait(ids, timeout=600)
        latencies += client.latencies(ids)
    return latencies


async def bulk(client: Client, documents: int, sentences: int, tag: str) -> list[str]:
    return [
        await client.submit({"text": document_text(sentences, n) + f" {tag}", "format": "wav"})
        for n in range(documents)
    ]


async def measure(url: str, args: argparse.Namespace, run: str) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http, contextlib.AsyncExitStack() as stack:
        big = await stack.enter_async_context(Client(http, url, BULK))
        small = [await stack.enter_async_context(Client(http, url, k)) for k in INTERACTIVE]
        alone = await interactive(small, args.seconds, args.gap)

        started = time.perf_counter()
        ids = await bulk(big, args.documents, args.sentences, f"alone {run}")
        await big.wait(ids, timeout=1800)
        bulk_alone_s = max(big.done[i] for i in ids) - started

        started = time.perf_counter()
        ids = await bulk(big, args.documents, args.sentences, f"flood {run}")
        await asyncio.sleep(0.5)
        flooded = await interactive(small, args.seconds, args.gap)
        await big.wait(ids, timeout=1800)
        bulk_flood_s = max(big.done[i] for i in ids) - started  # it may end before the rest
    p99_alone, p99_flood = p99(alone), p99(flooded)
    return {
        "interactive_jobs": len(alone) + len(flooded),
        "alone_p50_ms": statistics.median(alone) * 1000,
        "alone_p99_ms": p99_alone * 1000,
        "flood_p50_ms": statistics.median(flooded) * 1000,
        "flood_p99_ms": p99_flood * 1000,
        "p99_target_ms": max(3 * p99_alone, P99_FLOOR_S) * 1000,
        "p99_met": p99_flood <= max(3 * p99_alone, P99_FLOOR_S),
        "bulk_alone_s": bulk_alone_s,
        "bulk_beside_interactive_s": bulk_flood_s,
        "bulk_throughput_ratio": bulk_alone_s / bulk_flood_s,
    }


def rows(report: dict[str, Any]) -> list[Row]:
    """The suite's rows (bench/suite.py, section 7): the fair order as ours, first come first
    served as the baseline, measured in the same run."""
    out: list[Row] = []
    for name, fair in report.get("fair", {}).items():
        fifo = report.get("fifo", {}).get(name, {})
        workers = name.removeprefix("workers_")
        where = f"{workers} eSpeak NG worker{'s' if workers != '1' else ''}"
        out.append(
            Row(
                SECTION,
                f"interactive p99 under a flood of documents, {where}",
                fair["flood_p99_ms"],
                "ms",
                fifo.get("flood_p99_ms"),
                f"<= 3x alone ({fair['alone_p99_ms']:.0f} ms) or 100 ms",
                bool(fair["p99_met"]),
                fair["runs"],
            )
        )
        out.append(
            Row(
                SECTION,
                f"interactive p50 under a flood of documents, {where}",
                fair["flood_p50_ms"],
                "ms",
                fifo.get("flood_p50_ms"),
                runs=fair["runs"],
            )
        )
        out.append(
            Row(
                SECTION,
                f"bulk throughput beside light interactive load / alone, {where}",
                fair["bulk_throughput_ratio"],
                "ratio",
                fifo.get("bulk_throughput_ratio"),
                f">= {BULK_RATIO_TARGET}",
                bool(fair["bulk_throughput_met"]),
                fair["runs"],
            )
        )
    return out


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The median of each figure over the runs, with its range as `<figure>_range`; the
    targets judged on the medians."""
    out: dict[str, Any] = {"runs": len(runs)}
    for key, value in runs[0].items():
        if isinstance(value, bool):
            continue
        values = [run[key] for run in runs]
        out[key] = statistics.median(values)
        if isinstance(value, float):
            out[f"{key}_range"] = [min(values), max(values)]
    out["p99_met"] = out["flood_p99_ms"] <= out["p99_target_ms"]
    out["bulk_throughput_met"] = out["bulk_throughput_ratio"] >= BULK_RATIO_TARGET
    return out


def settings_for(tmp: Path, tag: str, order: str) -> Settings:
    """The stack of one run (`tag`): eSpeak NG workers taking jobs in `order`, audio on disk."""
    store = f"file://{tmp / tag / 'audio'}"
    return Settings.of(
        host="127.0.0.1",
        data_dir=str(tmp / tag / "data"),
        engine="espeak",
        audio_store=store,
        api_keys=",".join((BULK, *INTERACTIVE)),
        log_level="WARNING",
        scheduler=cast(Literal["fair", "fifo"], order),
    ).replace(**LIMITS_OFF)


def main(argv: list[str] | None = None) -> int:
    p = cli.parser(
        "bench.fairness", __doc__, quick="1 worker, small documents", output="fairness",
        repeats=3, logs=True,
    )  # fmt: skip
    p.add_argument("--orders", nargs="+", default=["fifo", "fair"], choices=["fifo", "fair"])
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--seconds", type=float, default=15.0, help="interactive load per phase")
    p.add_argument("--gap", type=float, default=1.0, help="seconds between a client's jobs")
    p.add_argument("--documents", type=int, default=4)
    p.add_argument("--sentences", type=int, default=300)
    args = p.parse_args(argv)
    if args.quick:
        args.workers, args.seconds, args.documents, args.sentences = [1], 4.0, 2, 60
        args.repeats = 1
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    with bench_run("chattts-fairness-", args.keep_logs) as (procs, tmp):
        for workers in args.workers:
            for repeat in range(args.repeats):  # orders interleaved: the same noise for both
                for order in args.orders:
                    tag = f"{order}-w{workers}-r{repeat}"
                    settings = settings_for(tmp, tag, order)
                    url = start_stack(procs, settings, workers, folder=tmp / tag, tag=tag).url
                    run = asyncio.run(measure(url, args, tag))
                    runs.setdefault((order, workers), []).append(run)
                    procs.stop_all()
    figures: dict[str, Any] = {order: {} for order in args.orders}
    for (order, workers), measured in runs.items():
        summary = summarize(measured)
        figures[order][f"workers_{workers}"] = summary
        print(f"{order} workers_{workers} (median of {len(measured)} [min - max])")
        for key, value in summary.items():
            if key.endswith("_range"):
                continue
            spread = summary.get(f"{key}_range")
            text = f"{value:.2f}" if isinstance(value, float) else str(value)
            if spread:
                text += f"  [{spread[0]:.2f} - {spread[1]:.2f}]"
            print(f"  {key:30} {text}")
    figures["rows"] = [row.to_json() for row in rows(figures)]
    report.write_json(args.output, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
