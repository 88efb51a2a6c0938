"""The systems under benchmark, the one way to start them: an embedded Redis, ours (a web process
and workers of given settings, of this checkout or another) and the baseline design beside it."""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import redis.asyncio as aioredis

from bench.lib import baseline_env
from bench.lib.cli import REPO_ROOT
from bench.lib.identities import COOKIE_SECRET
from bench.lib.stats import BenchError
from core.infra.embedded_redis import EmbeddedRedis, free_port
from core.infra.settings import Settings
from testing.limits import LIMITS_OFF
from testing.procs import Proc, Processes

READY_TIMEOUT_S = 90.0


def start_redis(procs: Processes, tmp: Path, maxmemory: str = "0") -> str:
    """An embedded Redis (AOF everysec, as in production), stopped last; its URL. Unbounded
    unless `maxmemory` says, with CONFIG: as measured before."""
    server = EmbeddedRedis(tmp / "redis", maxmemory=maxmemory, config_command=True)
    server.data_dir.mkdir(parents=True, exist_ok=True)
    server.process = procs.start("redis", server.command(), tier=0).popen
    server.wait_ready()
    return server.url


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
    repo: Path = REPO_ROOT,
    profile: Path | None = None,
    environ: Mapping[str, str] | None = None,
    ready: bool = True,
    worker_hook: Callable[[int], tuple[str, Mapping[str, str]]] | None = None,
) -> Service:
    """Ours with `settings` on a free port: an embedded Redis in `folder`/redis (unbounded
    unless `maxmemory` says; no `folder`: the Redis `settings` name), one web process and
    `workers` workers of the checkout at `repo`, named `<tag>-web` and `<tag>-worker-<n>` from 1
    (each worker's name too; their metrics endpoints off: several share the host). `environ`:
    what they inherit (os.environ). `profile`: each runs under cProfile, written to
    <profile>/<name>.prof when it exits. `worker_hook(n)`: a module worker n runs under
    (`python -m MODULE cli worker`) and what it adds to its environment. Returns once /readyz
    answers 200 (a worker alive; /healthz without workers), or at once when not `ready`."""
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

    web = procs.start(f"{prefix}web", [*cli(f"{prefix}web"), "web"], env, cwd=repo)
    started = []
    for n in range(1, workers + 1):
        name = f"{prefix}worker-{n}"
        worker_env = {**env, "CHATTTS_WORKER_NAME": name, "CHATTTS_WORKER_METRICS_PORT": "0"}
        argv = [*cli(name), "worker"]
        if worker_hook is not None:
            module, extra = worker_hook(n)
            argv[argv.index("cli") : argv.index("cli")] = [module]
            worker_env.update(extra)
        started.append(procs.start(name, argv, worker_env, cwd=repo))
    service = Service(f"http://127.0.0.1:{settings.web.port}", redis_url, web, started)
    if ready:
        wait_http(procs, f"{service.url}/{'readyz' if workers else 'healthz'}")
    return service


def start_ours(
    procs: Processes, redis_url: str, tmp: Path, *, repo: Path = REPO_ROOT, **changes: object
) -> Service:
    """One web process of the checkout at `repo` (no worker) on `redis_url`, rate limits off
    unless `changes` set them (a benchmark measures the machinery, not the guard in front of it;
    `shipped_limits()` sets them as shipped)."""
    settings = Settings.of(
        redis_url=redis_url,
        host="127.0.0.1",
        data_dir=str(tmp / "data"),
        log_level="WARNING",
        worker_name="bench-web",
        cookie_secret=COOKIE_SECRET,  # the simulated users' cookies are signed with it
    ).replace(**{**LIMITS_OFF, **changes})
    return start_stack(procs, settings, 0, folder=None, tag="ours", repo=repo)


def shipped_limits() -> dict[str, Any]:
    """The limits as shipped (what LIMITS_OFF lifts)."""
    return {name: Settings().value(name) for name in LIMITS_OFF}


@dataclass
class Stack:
    """Ours and (unless skipped) the baseline on one Redis, `workers` workers each."""

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
        stack.baseline_redis_url = baseline_env.redis_url(ours.redis_url)
        stack.baseline_url, stack.baseline_procs = start_baseline_processes(
            procs, stack.baseline_redis_url, args, args.workers
        )
    return stack


def start_baseline(procs: Processes, redis_url: str, args: argparse.Namespace) -> str:
    """The baseline's submit API alone (no worker) on `redis_url`'s db 1, answering: its URL."""
    url, _ = start_baseline_processes(procs, baseline_env.redis_url(redis_url), args, 0)
    wait_http(procs, f"{url}/tts/query/ready-probe")
    return url


def start_baseline_processes(
    procs: Processes, redis: str, args: argparse.Namespace, workers: int
) -> tuple[str, list[str]]:
    """Its API (uvicorn, one process, as its README runs it) and `workers` workers on `redis`,
    not waited for: the API's URL and the processes' names."""
    baseline_dir = baseline_env.find_baseline(args.baseline_dir)
    venv = baseline_env.ensure_venv(Path(args.baseline_venv), baseline_dir)
    port = free_port()
    env = {**os.environ, "REDIS_URL": redis}
    procs.start(
        "baseline-api", baseline_env.api_command(venv, baseline_dir, port), env, cwd=baseline_dir
    )
    names = ["baseline-api"]
    for i in range(workers):
        names.append(f"baseline-worker-{i + 1}")
        procs.start(
            names[-1], baseline_env.worker_command(venv, baseline_dir), env, cwd=baseline_dir
        )
    return f"http://127.0.0.1:{port}", names


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


def wait_http(procs: Processes, url: str, timeout: float = READY_TIMEOUT_S) -> None:
    """Until `url` answers 200 (every process alive meanwhile)."""
    deadline = time.monotonic() + timeout
    while True:
        procs.check_alive()
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (OSError, urllib.error.URLError):
            pass
        if time.monotonic() > deadline:
            raise BenchError(f"{url} did not answer 200 within {timeout:.0f} s")
        time.sleep(0.1)


def raise_nofile(wanted: int) -> int:
    """Raise this process's open-file limit (children inherit it) towards `wanted`; the new
    soft limit. Fails loudly when the hard limit is too low for the run."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    if soft < wanted:
        raise BenchError(f"open-file limit {soft} (hard {hard}) is below the {wanted} needed")
    return soft


def rss_kb(pid: int) -> int:
    """Resident memory of a process (VmRSS, kB), from /proc (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise BenchError(f"no VmRSS for pid {pid}")
