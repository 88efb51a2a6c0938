"""Single processes for the benchmarks: an embedded Redis, one web process of ours (the web-tier
benchmarks: bench/submit.py, bench/sse_capacity.py), one baseline API process; readiness, RSS,
fd limits. Ours with its workers: bench/stack.py."""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import baseline_env
from bench.identities import COOKIE_SECRET
from core.infra.embedded_redis import EmbeddedRedis, free_port
from core.infra.settings import ENV_PREFIX, SETTINGS, Settings
from testing.limits import LIMITS_OFF
from testing.procs import Proc, Processes, bench_run

REPO_ROOT = Path(__file__).resolve().parent.parent
READY_TIMEOUT_S = 60.0


class BenchFailure(Exception):
    """A measurement that must not be reported: a refused request, a lost event, a dead server."""


def raise_nofile(wanted: int) -> int:
    """Raise this process's open-file limit (children inherit it) towards `wanted`; the new
    soft limit. Fails loudly when the hard limit is too low for the run."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    if soft < wanted:
        raise BenchFailure(f"open-file limit {soft} (hard {hard}) is below the {wanted} needed")
    return soft


def start_redis(procs: Processes, tmp: Path, maxmemory: str = "0") -> str:
    """An embedded Redis (AOF everysec, as in production), stopped last; its URL. Unbounded
    unless `maxmemory` says, with CONFIG: as measured before."""
    server = EmbeddedRedis(tmp / "redis", maxmemory=maxmemory, config_command=True)
    server.data_dir.mkdir(parents=True, exist_ok=True)
    server.process = procs.start("redis", server.command(), tier=0).popen
    server.wait_ready()
    return server.url


def start_ours(
    procs: Processes, redis_url: str, tmp: Path, *, repo: Path = REPO_ROOT, **changes: object
) -> tuple[str, Proc]:
    """One `chattts-online web` process of the checkout at `repo` (no worker), rate limits off
    unless `changes` set them (a benchmark measures the machinery, not the guard in front of it;
    `shipped_limits()` sets them as shipped): its URL and process."""
    port = free_port()
    settings = Settings.of(
        redis_url=redis_url,
        host="127.0.0.1",
        port=port,
        data_dir=str(tmp / "data"),
        log_level="WARNING",
        worker_name="bench-web",
        cookie_secret=COOKIE_SECRET,  # the simulated users' cookies are signed with it
    ).replace(**{**LIMITS_OFF, **changes})
    env = {**os.environ, **settings.to_env()}
    proc = procs.start("ours-web", [sys.executable, "-m", "cli", "web"], env, cwd=repo)
    url = f"http://127.0.0.1:{port}"
    wait_http(procs, f"{url}/healthz")
    return url, proc


def shipped_limits() -> dict[str, object]:
    """The limits as shipped (what LIMITS_OFF lifts)."""
    return {name: Settings().value(name) for name in LIMITS_OFF}


def add_checkout_args(p: argparse.ArgumentParser) -> None:
    """A bench of one checkout: which (another commit's, for a before and after in one run),
    where its figures go besides stdout, whether its processes' logs are kept."""
    p.add_argument("--repo", default=str(REPO_ROOT), help="the checkout to serve")
    p.add_argument("--output", help="write the figures here as JSON too")
    p.add_argument("--keep-logs", action="store_true")


def run_checkout(
    prefix: str,
    args: argparse.Namespace,
    measure: Callable[[argparse.Namespace, Processes, Path], dict[str, Any]],
) -> None:
    """Run `measure` with its processes and folder, then print its figures (and write them to
    --output)."""
    with bench_run(prefix, args.keep_logs) as (procs, tmp):
        figures = measure(args, procs, tmp)
    text = json.dumps(figures, indent=2)
    print(text)
    if args.output:
        Path(args.output).write_text(text + "\n")


def start_baseline(procs: Processes, redis_url: str, args: argparse.Namespace) -> str:
    """The baseline's submit API (uvicorn, one process, as its README runs it) on Redis db 1."""
    baseline_dir = baseline_env.find_baseline(args.baseline_dir)
    venv = baseline_env.ensure_venv(Path(args.baseline_venv), baseline_dir)
    port = free_port()
    env = {**os.environ, "REDIS_URL": baseline_redis_url(redis_url)}
    command = baseline_env.api_command(venv, baseline_dir, port)
    procs.start("baseline-api", command, env, cwd=baseline_dir)
    url = f"http://127.0.0.1:{port}"
    wait_http(procs, f"{url}/tts/query/ready-probe")
    return url


def baseline_redis_url(redis_url: str) -> str:
    """Same server, its own database: its keys never meet ours."""
    return redis_url.rsplit("/", 1)[0] + "/1"


def wait_http(procs: Processes, url: str, timeout: float = READY_TIMEOUT_S) -> None:
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
            raise BenchFailure(f"{url} did not answer 200 within {timeout:.0f} s")
        time.sleep(0.1)


def rss_kb(pid: int) -> int:
    """Resident memory of a process (VmRSS, kB), from /proc (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise BenchFailure(f"no VmRSS for pid {pid}")


def setting(text: str) -> tuple[str, object]:
    """`--setting name=value`: a field of our Settings, converted as from its CHATTTS_ variable."""
    name, sep, value = text.partition("=")
    name = name.strip().lower()
    if not sep or name not in SETTINGS:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=VALUE, NAME a setting")
    return name, Settings.from_env({f"{ENV_PREFIX}{name.upper()}": value}).value(name)


def add_setting_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--setting",
        type=setting,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting of our web process over the bench's (e.g. max_backlog=1, api_keys=k: "
        "requests are refused and the bench fails, as it must)",
    )


def add_baseline_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--skip-baseline", action="store_true", help="measure ours alone")
    p.add_argument("--baseline-dir", help="another copy of the baseline (bench/baseline)")
    p.add_argument("--baseline-venv", default=str(baseline_env.DEFAULT_VENV))
