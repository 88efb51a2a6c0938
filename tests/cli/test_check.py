"""`chattts-online check --live/--ready`: the probes' exit codes for live, stale and missing
workers and for a reachable or unreachable Redis, through the real command."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import orjson
import redis

from core.infra.settings import Settings
from tests.conftest import ROOT, WorkerProcess

# Slow enough that "stale" (older than 2 periods) and "missing" (key expired after 3) are
# seconds apart, whatever the machine's load: a probe's own start (Python, its imports) takes
# more than a second on a busy 2-core machine.
HEARTBEAT_S = 3.0


def check(settings: Settings, *flags: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, **settings.to_env(), **env}
    environment.pop("CHATTTS_WORKER_NAME", None)
    environment.update(env)
    return subprocess.run(
        [sys.executable, "-m", "cli", "check", *flags],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_ready_follows_redis(settings: Settings) -> None:
    ok = check(settings, "--ready")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "ready" in ok.stdout and "single, the queue's primary 127.0.0.1:" in ok.stdout
    # A replica required and none there (the test Redis has none): not ready, and why.
    short = check(settings.replace(redis_min_replicas=1), "--ready")
    assert short.returncode == 1, short.stdout
    assert "too few replicas in sync" in short.stdout and "(1 required)" in short.stdout
    down = check(settings.replace(redis_url="redis://127.0.0.1:1/0"), "--ready")
    assert down.returncode == 1
    assert "unreachable" in down.stdout


def test_live_for_a_live_then_stale_then_missing_worker(
    settings: Settings, start_worker: Callable[..., WorkerProcess]
) -> None:
    settings = settings.replace(heartbeat_s=HEARTBEAT_S)
    worker = start_worker("probe-me", CHATTTS_HEARTBEAT_S=str(HEARTBEAT_S))
    live = check(settings, "--live", CHATTTS_WORKER_NAME="probe-me")
    assert live.returncode == 0, live.stdout + live.stderr
    by_flag = check(settings, "--live", "--worker-name", "probe-me")
    assert by_flag.returncode == 0, by_flag.stdout
    # Without a name, any worker of this host will do.
    assert check(settings, "--live").returncode == 0
    other = check(settings, "--live", CHATTTS_WORKER_NAME="somebody-else")
    assert other.returncode == 1 and "no heartbeat" in other.stdout

    os.kill(worker.process.pid, signal.SIGSTOP)  # hung: alive, but its heartbeat stops
    try:
        client = redis.Redis.from_url(settings.redis.redis_url or "")
        beat = orjson.loads(client.get(worker.keys.worker("probe-me")) or b"{}")
        client.close()
        # Older than 2 periods (stale), younger than 3 (the key's lifetime): still there.
        time.sleep(max(0.0, beat["ts"] + 2.1 * HEARTBEAT_S - time.time()))
        stale = check(settings, "--live", CHATTTS_WORKER_NAME="probe-me")
        assert stale.returncode == 1, stale.stdout
        assert "stale" in stale.stdout
        time.sleep(max(0.0, beat["ts"] + 3.3 * HEARTBEAT_S - time.time()))
        missing = check(settings, "--live", CHATTTS_WORKER_NAME="probe-me")
        assert missing.returncode == 1 and "no heartbeat" in missing.stdout
    finally:
        os.kill(worker.process.pid, signal.SIGCONT)
    # Resumed: it beats again and the probe passes again.
    deadline = time.monotonic() + 10
    while check(settings, "--live", CHATTTS_WORKER_NAME="probe-me").returncode != 0:
        assert time.monotonic() < deadline, "the resumed worker never became live again"
        time.sleep(0.3)


def test_live_rides_out_a_redis_outage(settings: Settings) -> None:
    """Liveness cannot tell without Redis and must not restart workers for its outage (each
    would reload its model); readiness reports the outage."""
    result = check(settings.replace(redis_url="redis://127.0.0.1:1/0"), "--live")
    assert result.returncode == 0 and "cannot tell" in result.stdout


def test_probe_flags_exclude_each_other(settings: Settings) -> None:
    result = check(settings, "--live", "--ready")
    assert result.returncode == 2 and "not allowed with" in result.stderr


def test_settings_that_would_wedge_the_fleet_stop_every_process_at_its_start(
    settings: Settings,
) -> None:
    """A weight of nan once crash-looped every worker on that key's first job: now neither tier
    starts, and each names the setting."""
    for command, variable, bad in (
        ("worker", "CHATTTS_KEY_WEIGHTS", "key-a=nan"),
        ("web", "CHATTTS_KEY_WEIGHTS", "key-a=inf:bulk"),
        ("worker", "CHATTTS_STREAM_HEADROOM", "nan"),
        ("web", "CHATTTS_SUBMIT_RATE_PER_CLIENT", "inf"),
    ):
        env = {**os.environ, **settings.to_env(), variable: bad}
        result = subprocess.run(
            [sys.executable, "-m", "cli", command],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 2 and variable in result.stderr, (command, result.stderr)
