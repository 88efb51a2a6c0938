"""The systems under benchmark, started for one run: an embedded Redis, ours (web and espeak
workers) and the baseline design (its API and workers), and the wait until both are ready."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import redis.asyncio as aioredis

from bench import baseline_env
from bench.identities import COOKIE_SECRET
from core.infra.embedded_redis import EmbeddedRedis, free_port
from core.infra.settings import LIMITS_OFF, Settings
from testing.procs import Processes

REPO_ROOT = Path(__file__).resolve().parent.parent
READY_TIMEOUT_S = 90.0


@dataclass
class Stack:
    procs: Processes
    redis_url: str
    ours_url: str
    baseline_url: str | None
    workers: int
    baseline_redis_url: str | None = None
    ours_procs: list[str] = field(default_factory=list)
    baseline_procs: list[str] = field(default_factory=list)


def start_stack(args: argparse.Namespace, tmp: Path, procs: Processes) -> Stack:
    """One embedded Redis; ours (web + N espeak workers); the baseline (API + N workers)."""
    redis_server = EmbeddedRedis(
        tmp / "redis", maxmemory="0", config_command=True
    )  # unbounded, CONFIG: as measured before
    redis_server.data_dir.mkdir(parents=True, exist_ok=True)
    redis_server.process = procs.start("redis", redis_server.command(), tier=0).popen
    redis_server.wait_ready()

    ours_port = free_port()
    settings = Settings(
        redis_url=redis_server.url,
        engine="espeak",
        host="127.0.0.1",
        port=ours_port,
        # The bench's users keep up to `concurrency` jobs each in flight; never refuse them.
        max_active_per_client=1_000_000,
        max_backlog=1_000_000,
        max_backlog_per_owner=0,
        cookie_secret=COOKIE_SECRET,  # the simulated users' cookies are signed with it
        **LIMITS_OFF,  # type: ignore[arg-type]
        data_dir=str(tmp / "data"),
        # WARNING: no per-request access log line, as the baseline runs with --no-access-log.
        log_level=args.log_level,
        worker_name="bench-web",
    )
    env = {**os.environ, **settings.to_env()}

    def cli(name: str) -> list[str]:
        if not args.profile:
            return [sys.executable, "-m", "cli"]
        # cProfile of the process's main thread (its event loop), written when it exits.
        out = Path(args.profile) / f"{name}.prof"
        out.parent.mkdir(parents=True, exist_ok=True)
        return [sys.executable, "-m", "cProfile", "-o", str(out), "-m", "cli"]

    stack = Stack(procs, redis_server.url, f"http://127.0.0.1:{ours_port}", None, args.workers)
    procs.start("ours-web", [*cli("ours-web"), "web"], env, cwd=REPO_ROOT)
    stack.ours_procs.append("ours-web")
    for i in range(args.workers):
        name = f"ours-worker-{i + 1}"
        worker_env = {**env, "CHATTTS_WORKER_NAME": f"bench-worker-{i + 1}"}
        procs.start(name, [*cli(name), "worker"], worker_env, cwd=REPO_ROOT)
        stack.ours_procs.append(name)

    if not args.skip_baseline:
        baseline_dir = baseline_env.find_baseline(args.baseline_dir)
        venv = baseline_env.ensure_venv(Path(args.baseline_venv), baseline_dir)
        port = free_port()
        # Same server, its own database: its keys (tts:queue, tts:result:*) never meet ours.
        stack.baseline_redis_url = redis_server.url.rsplit("/", 1)[0] + "/1"
        benv = {**os.environ, "REDIS_URL": stack.baseline_redis_url}
        api = baseline_env.api_command(venv, baseline_dir, port)
        procs.start("baseline-api", api, benv, cwd=baseline_dir)
        stack.baseline_procs.append("baseline-api")
        for i in range(args.workers):
            name = f"baseline-worker-{i + 1}"
            procs.start(
                name, baseline_env.worker_command(venv, baseline_dir), benv, cwd=baseline_dir
            )
            stack.baseline_procs.append(name)
        stack.baseline_url = f"http://127.0.0.1:{port}"
    return stack


async def wait_ready(stack: Stack) -> None:
    """Ours: /readyz with every worker alive. Baseline: its API answers and its worker beats."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    ours_ok = False
    baseline_ok = stack.baseline_url is None
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http:
        beat = aioredis.from_url(stack.baseline_redis_url) if stack.baseline_redis_url else None
        try:
            while not (ours_ok and baseline_ok):
                stack.procs.check_alive()
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"not ready after {READY_TIMEOUT_S:.0f}s (ours: {ours_ok}, "
                        f"baseline: {baseline_ok}); see the logs"
                    )
                try:
                    if not ours_ok:
                        async with http.get(f"{stack.ours_url}/readyz") as resp:
                            body = await resp.json()
                            ours_ok = resp.status == 200 and body.get("workers", 0) >= stack.workers
                    if not baseline_ok and beat is not None:
                        async with http.get(f"{stack.baseline_url}/tts/query/ready-probe") as resp:
                            api_ok = resp.status == 200
                        baseline_ok = api_ok and bool(await beat.exists("tts:worker:heartbeat"))
                except (aiohttp.ClientError, TimeoutError, ValueError):
                    pass
                if not (ours_ok and baseline_ok):
                    await asyncio.sleep(0.2)
        finally:
            if beat is not None:
                await beat.aclose()
