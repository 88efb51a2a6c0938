"""The systems under benchmark, started for one run. `start_stack` is the one way a benchmark
starts ours: an embedded Redis (or the one its settings name), a web process and worker processes
of the given settings. `start_systems` starts ours beside the baseline design (its API and
workers) on one Redis, and `wait_ready` waits until both are ready."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import redis.asyncio as aioredis

from bench import baseline_env
from bench.identities import COOKIE_SECRET
from bench.servers import baseline_redis_url, start_redis, wait_http
from core.infra.embedded_redis import free_port
from core.infra.settings import Settings
from testing.limits import LIMITS_OFF
from testing.procs import Proc, Processes

REPO_ROOT = Path(__file__).resolve().parent.parent
READY_TIMEOUT_S = 90.0


@dataclass
class Service:
    """Ours, started by `start_stack`: its URL, its Redis, its processes."""

    url: str
    redis_url: str
    web: Proc
    workers: list[Proc]

    @property
    def names(self) -> list[str]:
        """Its processes' names (their logs, their CPU in `Processes.cpu`), the web's first."""
        return [self.web.name, *(worker.name for worker in self.workers)]


def start_stack(
    procs: Processes,
    settings: Settings,
    workers: int,
    *,
    folder: Path | None,
    maxmemory: str = "0",
    tag: str = "",
    profile: Path | None = None,
    environ: Mapping[str, str] | None = None,
    ready: bool = True,
    worker_hook: Callable[[int], tuple[str, Mapping[str, str]]] | None = None,
) -> Service:
    """Ours with `settings` on a free port: an embedded Redis in `folder`/redis (unbounded
    unless `maxmemory` says; no `folder`: the Redis `settings` name), one web process and
    `workers` workers, named `<tag>-web` and `<tag>-worker-<n>` from 1 (each worker's name too;
    their metrics endpoints off: several share the host). `environ`: what they inherit
    (os.environ). `profile`: each runs under cProfile, written to <profile>/<name>.prof when it
    exits. `worker_hook(n)`: a module worker n runs under (`python -m MODULE cli worker`) and
    what it adds to its environment. Returns once /readyz answers 200 (a worker alive), or at
    once when not `ready`."""
    redis_url = (
        settings.redis.redis_url if folder is None else start_redis(procs, folder, maxmemory)
    )
    if redis_url is None:
        raise ValueError("start_stack: no Redis (a folder to start one in, or settings naming one)")
    settings = settings.replace(redis_url=redis_url, port=free_port())
    env = {**(os.environ if environ is None else environ), **settings.to_env()}
    prefix = f"{tag}-" if tag else ""

    def cli(name: str) -> list[str]:
        if profile is None:
            return [sys.executable, "-m", "cli"]
        # cProfile of the process's main thread (its event loop), written when it exits.
        out = profile / f"{name}.prof"
        out.parent.mkdir(parents=True, exist_ok=True)
        return [sys.executable, "-m", "cProfile", "-o", str(out), "-m", "cli"]

    web = procs.start(f"{prefix}web", [*cli(f"{prefix}web"), "web"], env, cwd=REPO_ROOT)
    started = []
    for n in range(1, workers + 1):
        name = f"{prefix}worker-{n}"
        worker_env = {**env, "CHATTTS_WORKER_NAME": name, "CHATTTS_WORKER_METRICS_PORT": "0"}
        argv = [*cli(name), "worker"]
        if worker_hook is not None:
            module, extra = worker_hook(n)
            argv[argv.index("cli") : argv.index("cli")] = [module]
            worker_env.update(extra)
        started.append(procs.start(name, argv, worker_env, cwd=REPO_ROOT))
    service = Service(f"http://127.0.0.1:{settings.web.port}", redis_url, web, started)
    if ready:
        wait_http(procs, f"{service.url}/readyz")
    return service


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


def start_systems(args: argparse.Namespace, tmp: Path, procs: Processes) -> Stack:
    """One embedded Redis; ours (web + N espeak workers); the baseline (API + N workers). Not
    waited for: `wait_ready`."""
    settings = Settings.of(
        engine="espeak",
        host="127.0.0.1",
        # The bench's users keep up to `concurrency` jobs each in flight; never refuse them.
        max_active_per_client=1_000_000,
        max_backlog=1_000_000,
        max_backlog_per_owner=0,
        cookie_secret=COOKIE_SECRET,  # the simulated users' cookies are signed with it
        **LIMITS_OFF,
        data_dir=str(tmp / "data"),
        # WARNING: no per-request access log line, as the baseline runs with --no-access-log.
        log_level=args.log_level,
        worker_name="bench-web",
    )
    profile = Path(args.profile) if args.profile else None
    ours = start_stack(
        procs, settings, args.workers, folder=tmp, tag="ours", profile=profile, ready=False
    )
    stack = Stack(procs, ours.redis_url, ours.url, None, args.workers, ours_procs=ours.names)
    if not args.skip_baseline:
        baseline_dir = baseline_env.find_baseline(args.baseline_dir)
        venv = baseline_env.ensure_venv(Path(args.baseline_venv), baseline_dir)
        port = free_port()
        # Same server, its own database: its keys (tts:queue, tts:result:*) never meet ours.
        stack.baseline_redis_url = baseline_redis_url(ours.redis_url)
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
