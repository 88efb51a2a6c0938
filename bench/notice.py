"""Measurements 2 and 3 of the suite, at light load (one job at a time, espeak, one worker each).

2. Completion notice latency: from the moment the result is stored to the moment the client
   knows. "Stored" is when Redis announces the `set` of the result key (ours: the audio key that
   the worker's completion script writes together with the succeeded event; the baseline: its
   `tts:result:<id>`), as seen by a separate observer process (bench/lib/keyspace.py). "Knows" is
   ours: the succeeded event arrives on the client's open `/v1/events` SSE stream; the baseline:
   its poll of `/tts/query/<id>` answers DONE, polling every 100 ms or 500 ms from a random
   phase (a poller's timer is not synchronised with the worker).
3. Pipeline overhead: submit sent -> client knows, minus the time the job spent in its worker
   (ours: `started_at` to `finished_at` of the job's snapshot, the start and completion scripts;
   the baseline: the BRPOP that took the job to the `set` of its result). What is left is the
   web tier, the queue hand-off and the notification path.

    python -m bench.notice [--quick] [--output PATH] [--skip-baseline]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import random
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

import orjson

from bench.lib import cli, harness
from bench.lib.cli import REPO_ROOT
from bench.lib.clients import ClientEventsClient, PollingClient, _check_wav, text_for
from bench.lib.keyspace import KeyspaceLog
from bench.lib.report import Row
from bench.lib.stack import Stack, wait_ready
from bench.lib.stats import BenchError, ms_stats
from core.infra.settings import Settings
from core.queue.keys import Keys

SECTION_NOTICE = "2. completion notice"
SECTION_OVERHEAD = "3. pipeline overhead"
QUERY_TIMEOUT_S = 30.0


@dataclass
class Timed:
    """One job, wall-clock seconds (time.time(), one clock for every process of the machine)."""

    job_id: str
    sent: float  # the submit request was sent
    known: float  # the client knows the job succeeded
    worker_s: float = 0.0  # time in the worker's hands (start to stored result)
    stored: float = 0.0  # the result key's `set`, as the observer saw it
    stages: dict[str, float] | None = None  # ours: where the time went, from the job's snapshot

    @property
    def notice_s(self) -> float:
        return self.known - self.stored

    @property
    def overhead_s(self) -> float:
        return (self.known - self.sent) - self.worker_s


class OursSSE(ClientEventsClient):
    """A user with its `/v1/events` stream open; submits one job and waits for its event."""

    async def timed_job(self, text: str) -> Timed:
        sent = time.time()
        body = await self.submit(text)
        _, known, kind, event = await self.waiters.wait(body["id"])
        if kind != "succeeded":
            raise BenchError(f"{self.label}: job {body['id']} ended {kind}: {event.get('job')}")
        job = event["job"]
        created, started, finished = job["created_at"], job["started_at"], job["finished_at"]
        stages = {
            "accept": created - sent,  # request in, validated, enqueue script run
            "queue": started - created,  # in the stream until the worker's start script
            "worker": finished - started,  # engine, encoding, completion script called
            "push": known - finished,  # completion script, doorbell, hub, SSE, client
        }
        return Timed(body["id"], sent, known, finished - started, stages=stages)


class BaselinePoller(PollingClient):
    """The baseline's client: submit, then query every `poll_s`, the first after a random part
    of the interval."""

    async def timed_job(self, text: str) -> Timed:
        sent = time.time()
        async with self.http.post(
            f"{self.base}/tts/submit", json={"text": text, "voice": self.voice}
        ) as resp:
            if resp.status != 200:
                raise BenchError(f"{self.label}: submit answered {resp.status}")
            task_id = (await resp.json())["task_id"]
        next_poll = time.monotonic() + random.uniform(0, self.poll_s)
        async with asyncio.timeout(QUERY_TIMEOUT_S):
            while True:
                await asyncio.sleep(max(0.0, next_poll - time.monotonic()))
                next_poll += self.poll_s
                async with self.http.get(f"{self.base}/tts/query/{task_id}") as resp:
                    if resp.status != 200:
                        raise BenchError(f"{self.label}: query answered {resp.status}")
                    answer = await resp.json(loads=orjson.loads)
                if answer["status"] == "DONE":
                    known = time.time()
                    break
                if answer["status"] != "PENDING":
                    raise BenchError(f"{self.label}: job {task_id} ended {answer}")
        _check_wav(base64.b64decode(answer["audio"]), self.label)
        return Timed(task_id, sent, known)


async def ours_jobs(url: str, jobs: int, first_text: int, log: KeyspaceLog | None) -> list[Timed]:
    """`jobs` jobs one after the other over one SSE connection; with `log`, when each was stored."""
    keys = Keys(Settings().redis.key_prefix, Settings().redis.queue)
    client = OursSSE(url)
    out: list[Timed] = []
    try:
        await client.open()
        for i in range(jobs):
            timed = await client.timed_job(text_for(first_text + i))
            if log is not None:
                timed.stored = await log.stored_at("0", keys.audio(timed.job_id))
            out.append(timed)
    finally:
        await client.close()
    return out


async def baseline_jobs(
    url: str, poll_s: float, jobs: int, first_text: int, log: KeyspaceLog | None
) -> list[Timed]:
    client = BaselinePoller(url, poll_s, f"baseline, polling every {poll_s * 1000:.0f} ms")
    out: list[Timed] = []
    try:
        await client.open()
        for i in range(jobs):
            timed = await client.timed_job(text_for(first_text + i))
            if log is not None:
                timed.stored = await log.stored_at("1", f"tts:result:{timed.job_id}")
                timed.worker_s = timed.stored - log.popped_before(timed.stored, timed.sent)
            out.append(timed)
    finally:
        await client.close()
    return out


def _summary(runs: list[Timed]) -> dict[str, Any]:
    staged = [t.stages for t in runs if t.stages]
    return {
        "stages_ms": {k: ms_stats([s[k] for s in staged]) for k in staged[0]} if staged else {},
        "notice_ms": ms_stats([t.notice_s for t in runs]),
        "overhead_ms": ms_stats([t.overhead_s for t in runs]),
        "worker_ms": ms_stats([t.worker_s for t in runs]),
        "submit_to_known_ms": ms_stats([t.known - t.sent for t in runs]),
        "jobs": [asdict(t) for t in runs],
    }


def rows(raw: dict[str, Any]) -> list[Row]:
    ours = raw["ours_sse"]
    b100, b500 = raw.get("baseline_100ms"), raw.get("baseline_500ms")

    def base(summary: dict[str, Any] | None, metric: str, q: str) -> float | None:
        return None if summary is None else float(summary[metric][q])

    out: list[Row] = []
    for poll, summary in (("100 ms", b100), ("500 ms", b500)):
        for q in ("p50", "p99"):
            target = "< 10 ms" if q == "p99" else None
            value = ours["notice_ms"][q]
            out.append(
                Row(
                    SECTION_NOTICE,
                    f"stored -> client knows, {q}: ours SSE vs baseline polling every {poll}",
                    value,
                    "ms",
                    base(summary, "notice_ms", q),
                    target,
                    None if target is None else value < 10,
                )
            )
    for q in ("p50", "p99"):
        target = "< 5 ms" if q == "p50" else None
        value = ours["overhead_ms"][q]
        out.append(
            Row(
                SECTION_OVERHEAD,
                f"submit -> succeeded minus worker time, {q} (baseline: polling 100 ms)",
                value,
                "ms",
                base(b100, "overhead_ms", q),
                target,
                None if target is None else value < 5,
            )
        )
    out.append(
        Row(
            SECTION_OVERHEAD,
            "worker time per job (espeak, taken -> stored), p50",
            ours["worker_ms"]["p50"],
            "ms",
            base(b100, "worker_ms", "p50"),
        )
    )
    return out


async def measure(args: argparse.Namespace) -> tuple[list[Row], dict[str, Any]]:
    n_ours, n_100, n_500 = (20, 15, 6) if args.quick else (200, 150, 60)
    warmup = 2 if args.quick else 5
    with harness.systems(args, workers=1) as stack:
        raw = await _measure(stack, args, n_ours, n_100, n_500, warmup)
    return rows(raw), raw


async def _measure(
    stack: Stack, args: argparse.Namespace, n_ours: int, n_100: int, n_500: int, warmup: int
) -> dict[str, Any]:
    await wait_ready(stack)
    stack.procs.start(
        "keyspace",
        [sys.executable, "-m", "bench.lib.keyspace", stack.redis_url],
        cwd=REPO_ROOT,
        tier=1,
    )
    log = KeyspaceLog(stack.procs.log_dir / "keyspace.log")
    await log.wait_ready()
    raw: dict[str, Any] = {
        "config": {
            "jobs": {"ours": n_ours, "baseline_100ms": n_100, "baseline_500ms": n_500},
            "observer": log.priority,
        }
    }
    print(f"notice: warm-up, then {n_ours} sequential jobs of ours over SSE ...", flush=True)
    await ours_jobs(stack.ours_url, warmup, 0, None)
    raw["ours_sse"] = _summary(await ours_jobs(stack.ours_url, n_ours, 100, log))
    if stack.baseline_url is not None:
        await baseline_jobs(stack.baseline_url, 0.02, warmup, 0, None)
        for poll_ms, n in ((100, n_100), (500, n_500)):
            print(f"notice: {n} sequential baseline jobs polled every {poll_ms} ms ...", flush=True)
            timed = await baseline_jobs(stack.baseline_url, poll_ms / 1000, n, 100, log)
            raw[f"baseline_{poll_ms}ms"] = _summary(timed)
    stack.procs.check_alive()
    return raw


def main() -> int:
    p = cli.parser(
        "bench.notice", __doc__, quick="fewer jobs (tests, CI)", output="notice", logs=True,
        log_level=True, baseline=True,
    )  # fmt: skip
    return harness.main("notice", p.parse_args(), measure)


if __name__ == "__main__":
    sys.exit(main())
