"""Sentinel failover under load: is every job answered 202 still there, and done once, after the
primary is killed? `python -m bench.failover [--min-replicas 1 0] [--rate 20] [--replicas 1]`

A primary, `--replicas` replicas (1) and three sentinels (testing/topologies.py); one web process
and two espeak workers that reach Redis through the sentinels. Jobs are submitted at a steady rate
over HTTP while one SSE client follows the submitter's events. A few seconds in, the primary gets
SIGKILL; `--lag` seconds before, the replicas lose their link to it (paused with SIGSTOP, their
connections closed by the primary), as in a network partition: the primary dies holding writes
no replica saw, which is what asynchronous replication can lose. Once the sentinels have promoted
a replica, the dead node is started again (as a supervisor would) and the sentinels make it the
new primary's replica. Load goes on for `--after` seconds more; then every job answered 202 is
followed to its end on the new primary.

Figures per CHATTTS_REDIS_MIN_REPLICAS: jobs accepted, lost (answered 202, gone), ended other
than succeeded, with two terminal events, missed by the SSE client; submit unavailability (the
first refusal after the kill to the first 202 again) and the failover itself.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import redis

from bench.lib import cli, report
from bench.lib.stack import start_stack
from cli.sse import sse_events
from core.infra.redis_client import connect_sync
from core.infra.settings import Settings
from core.queue.keys import Keys
from testing.limits import LIMITS_OFF
from testing.procs import Processes, bench_run
from testing.topologies import SentinelGroup

API_KEY = "failover-bench-key"
TERMINAL = frozenset({"succeeded", "failed", "cancelled", "dead"})
REQUEST_TIMEOUT_S = 15.0  # a submit that hangs this long is counted as one
SETTLE_TIMEOUT_S = 120.0  # every accepted job ends within this after the load stops


@dataclass
class Answer:
    sent: float
    status: int  # 0: no answer (connection error or timeout)
    latency_s: float
    job_id: str | None = None
    code: str | None = None


@dataclass
class EventLog:
    """What the SSE client saw: terminal events by job, and how often its stream broke."""

    terminal: dict[str, list[str]] = field(default_factory=dict)
    drops: int = 0


def service_settings(url: str, tmp: Path, min_replicas: int) -> Settings:
    return Settings.of(
        redis_url=url,
        queue="failover",
        engine="espeak",
        data_dir=str(tmp / "data"),
        api_keys=API_KEY,
        redis_min_replicas=min_replicas,
        lease_ms=3_000,  # a job whose start was lost with the primary runs again soon
        reclaim_interval_ms=500,
        block_ms=500,
        heartbeat_s=0.5,
        job_ttl_s=3_600,
        max_active_per_client=100_000,
        max_backlog_per_owner=0,
        log_level="WARNING",
    ).replace(**LIMITS_OFF)


async def submit(session: aiohttp.ClientSession, url: str, i: int, t0: float) -> Answer:
    sent = time.monotonic()
    body = {"text": f"Job number {i} survives the failover.", "voice": "en_male", "cache": False}
    try:
        async with asyncio.timeout(REQUEST_TIMEOUT_S):
            async with session.post(f"{url}/v1/tts/jobs", json=body) as response:
                payload = await response.json(content_type=None)
        status = response.status
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return Answer(sent - t0, 0, time.monotonic() - sent)
    error = payload.get("error") if isinstance(payload, dict) else None
    return Answer(
        sent - t0,
        status,
        time.monotonic() - sent,
        job_id=payload.get("id") if status == 202 else None,
        code=error.get("code") if isinstance(error, dict) else None,
    )


async def follow_events(session: aiohttp.ClientSession, url: str, log: EventLog) -> None:
    """The submitter's /v1/events, resumed by Last-Event-ID whenever the stream breaks."""
    last_id: str | None = None
    while True:
        headers = {"Last-Event-ID": last_id} if last_id else {}
        try:
            async with session.get(f"{url}/v1/events", headers=headers) as response:
                async for sse in sse_events(response):
                    last_id = sse.id or last_id
                    event = sse.json()
                    job = event.get("job") or {}
                    if event.get("type") in TERMINAL and job.get("id"):
                        log.terminal.setdefault(job["id"], []).append(event["type"])
        except (aiohttp.ClientError, ValueError):
            pass
        log.drops += 1
        await asyncio.sleep(0.2)


async def run_once(group: SentinelGroup, procs: Processes, tmp: Path, args: Any) -> dict[str, Any]:
    settings = service_settings(group.url, tmp, args.min_replicas)
    service = await asyncio.to_thread(start_stack, procs, settings, args.workers, folder=None)
    url = service.url
    log = EventLog()
    answers: list[Answer] = []
    headers = {"Authorization": f"Bearer {API_KEY}"}
    async with aiohttp.ClientSession(headers=headers) as session:
        follower = asyncio.create_task(follow_events(session, url, log))
        t0 = time.monotonic()
        tasks: list[asyncio.Task[Answer]] = []
        old_port = group.primary_port()
        replicas = [n for n in group.data_nodes if n.port != old_port]
        killed_at = promoted_at = synced_at = paused_at = None
        i = 0
        while True:
            now = time.monotonic() - t0
            if paused_at is None and args.lag > 0 and now >= args.before - args.lag:
                for replica in replicas:
                    replica.pause()
                await asyncio.to_thread(cut_replication, group, old_port)
                paused_at = now
            if killed_at is None and now >= args.before:
                group.node(old_port).kill()
                for replica in replicas:
                    replica.resume()
                killed_at = now
            elif killed_at is not None and promoted_at is None:
                with contextlib.suppress(RuntimeError):
                    if await asyncio.to_thread(group.primary_port) != old_port:
                        promoted_at = now
                        group.node(old_port).start()  # a supervisor restarts it: a replica now
            elif promoted_at is not None and synced_at is None:
                with contextlib.suppress(RuntimeError):
                    await asyncio.to_thread(group.wait_synced, 1, 0.05)
                    synced_at = now
            if synced_at is not None and now >= synced_at + args.after:
                break
            if now > args.before + 120:
                raise RuntimeError("the sentinels never completed the failover")
            tasks.append(asyncio.create_task(submit(session, url, i, t0)))
            i += 1
            await asyncio.sleep(1 / args.rate)
        answers = list(await asyncio.gather(*tasks))
        accepted = [a.job_id for a in answers if a.job_id]
        states = await asyncio.to_thread(settle, settings, accepted)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(j not in log.terminal for j in accepted):
            await asyncio.sleep(0.2)  # the SSE client's last events are on their way
        follower.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await follower
    return tally(args.min_replicas, answers, states, log, killed_at, promoted_at, synced_at)


def cut_replication(group: SentinelGroup, primary_port: int) -> None:
    """The primary drops its replicas' connections (the paused replica cannot come back)."""
    client = redis.Redis(port=primary_port, password=group.password, socket_timeout=2)
    try:
        client.client_kill_filter(_type="replica")
    finally:
        client.close()


def settle(settings: Settings, job_ids: list[str]) -> dict[str, tuple[str | None, int]]:
    """Each job's final state (None: gone) and its terminal events, once all have ended."""
    keys = Keys(settings.redis.key_prefix, settings.redis.queue)
    client = connect_sync(settings.redis.redis_url or "", socket_timeout=5)
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    try:
        while True:
            pipe = client.pipeline(transaction=False)
            for job_id in job_ids:
                pipe.hget(keys.job(job_id), "state")
            states = [s.decode() if s else None for s in pipe.execute()]
            if all(s is None or s in TERMINAL for s in states) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        pipe = client.pipeline(transaction=False)
        for job_id in job_ids:
            pipe.xrange(keys.job_events(job_id))
        out: dict[str, tuple[str | None, int]] = {}
        for job_id, state, entries in zip(job_ids, states, pipe.execute(), strict=True):
            kinds = [orjson.loads(fields[b"data"])["type"] for _, fields in entries]
            out[job_id] = (state, sum(k in TERMINAL for k in kinds))
        return out
    finally:
        client.close()


def tally(
    min_replicas: int,
    answers: list[Answer],
    states: dict[str, tuple[str | None, int]],
    log: EventLog,
    killed_at: float | None,
    promoted_at: float | None,
    synced_at: float | None,
) -> dict[str, Any]:
    assert killed_at is not None and promoted_at is not None
    statuses: dict[str, int] = {}
    for a in answers:
        key = str(a.status) + (f" {a.code}" if a.code else "")
        statuses[key] = statuses.get(key, 0) + 1
    refused = [a.sent for a in answers if a.status != 202 and a.sent >= killed_at]
    first_refusal = min(refused) if refused else None
    back = [a.sent for a in answers if a.status == 202 and first_refusal and a.sent > first_refusal]
    lost = sorted(j for j, (state, _) in states.items() if state is None)
    return {
        "min_replicas": min_replicas,
        "submitted": len(answers),
        "accepted": len(states),
        "lost": len(lost),
        "lost_ids": lost[:20],
        "not_succeeded": sum(1 for s, _ in states.values() if s not in (None, "succeeded")),
        "duplicate_terminal_events": sum(1 for _, n in states.values() if n > 1),
        "missed_by_sse": sum(1 for j, (s, _) in states.items() if s and j not in log.terminal),
        "sse_reconnects": log.drops,
        "statuses": statuses,
        "failover_s": round(promoted_at - killed_at, 2),
        "replica_back_s": round(synced_at - killed_at, 2) if synced_at else None,
        "unavailable_s": round(min(back) - first_refusal, 2) if back and first_refusal else None,
        "max_submit_latency_s": round(max(a.latency_s for a in answers), 2),
        "hung_submits": sum(1 for a in answers if a.status == 0),
        "server_errors": sum(1 for a in answers if a.status >= 500 and a.status != 503),
    }


def run(args: Any) -> dict[str, Any]:
    with bench_run("failover-", args.keep_logs) as (procs, tmp):
        group = SentinelGroup(tmp / "redis", replicas=args.replicas)
        try:
            group.start()
            return asyncio.run(run_once(group, procs, tmp, args))
        finally:
            procs.stop_all()
            group.stop()


def main() -> int:
    p = cli.parser("bench.failover", __doc__, output="failover", logs=True)
    p.add_argument("--min-replicas", type=int, nargs="+", default=[1, 0])
    p.add_argument("--rate", type=float, default=20.0, help="submissions per second")
    p.add_argument("--before", type=float, default=5.0, help="seconds of load before the kill")
    p.add_argument("--after", type=float, default=10.0, help="seconds of load once all is back")
    p.add_argument("--lag", type=float, default=0.5, help="seconds the replica lags at the kill")
    p.add_argument("--replicas", type=int, default=1)
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args()
    results = []
    for n in args.min_replicas:
        print(f"failover with CHATTTS_REDIS_MIN_REPLICAS={n} ...", flush=True)
        results.append(run(argparse.Namespace(**{**vars(args), "min_replicas": n})))
        print(json.dumps(results[-1], indent=2), flush=True)
    report.write_json(args.output, results)
    print(table(results))
    return 0 if all(r["lost"] == 0 for r in results if r["min_replicas"] > 0) else 1


def table(results: list[dict[str, Any]]) -> str:
    rows = [
        ("jobs answered 202", "accepted"),
        ("lost (202, then gone)", "lost"),
        ("ended other than succeeded", "not_succeeded"),
        ("two terminal events", "duplicate_terminal_events"),
        ("missed by the SSE client", "missed_by_sse"),
        ("failover (kill -> replica promoted), s", "failover_s"),
        ("submit unavailability, s", "unavailable_s"),
        ("slowest submit answer, s", "max_submit_latency_s"),
        ("5xx other than 503", "server_errors"),
    ]
    head = "| | " + " | ".join(f"MIN_REPLICAS={r['min_replicas']}" for r in results) + " |"
    lines = [head, "|---" * (len(results) + 1) + "|"]
    for label, key in rows:
        lines.append(f"| {label} | " + " | ".join(str(r[key]) for r in results) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
