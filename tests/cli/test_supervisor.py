"""`chattts-online run`: embedded Redis, web and worker as real processes, restarts, clean stop."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from cli.supervisor import Supervisor
from core.infra.embedded_redis import free_port
from core.infra.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def children_of(pid: int) -> dict[int, str]:
    """Direct children of `pid` with their command lines (from /proc)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid:
            found[int(entry.name)] = cmdline
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def get_json(url: str) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def wait_for(predicate: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():  # type: ignore[operator]
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise TimeoutError(what)


def test_worker_i_gets_metrics_port_base_plus_i_minus_one() -> None:
    settings = Settings(redis_url="redis://127.0.0.1:1/0", worker_metrics_port=9300)
    children = Supervisor(settings, workers=3).plan()
    assert [c.name for c in children] == ["web", "worker-1", "worker-2", "worker-3"]
    ports = [c.env["CHATTTS_WORKER_METRICS_PORT"] for c in children[1:]]
    assert ports == ["9300", "9301", "9302"]
    off = Supervisor(settings.replace(worker_metrics_port=0), workers=2).plan()
    assert [c.env["CHATTTS_WORKER_METRICS_PORT"] for c in off[1:]] == ["0", "0"]


def test_run_starts_supervises_and_stops_everything(tmp_path: Path) -> None:
    port = free_port()
    metrics_port = free_port()
    env = {k: v for k, v in os.environ.items() if "REDIS_URL" not in k}
    env.update(
        {
            "CHATTTS_ENGINE": "espeak",
            "CHATTTS_HEARTBEAT_S": "0.3",
            "CHATTTS_DATA_DIR": str(tmp_path / "data"),
            "CHATTTS_WORKER_METRICS_PORT": str(metrics_port),
        }
    )
    log = (tmp_path / "run.log").open("wb")
    run = subprocess.Popen(
        [sys.executable, "-m", "cli", "run", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: get_json(f"{base}/readyz")[0] == 200, 60, "the service never got ready")
        kids = children_of(run.pid)
        assert any("redis-server" in cmd for cmd in kids.values())
        assert (tmp_path / "data" / "redis").is_dir()  # its data and AOF live there
        workers = [pid for pid, cmd in kids.items() if cmd.endswith(" worker")]
        webs = [pid for pid, cmd in kids.items() if cmd.endswith(" web")]
        assert len(workers) == 1 and len(webs) == 1
        # The worker serves its own metrics on the base port (worker 1).
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=2) as r:
            assert b"chattts_worker_ready 1.0" in r.read()
        # A child that dies is restarted.
        os.kill(workers[0], signal.SIGKILL)
        wait_for(
            lambda: any(
                cmd.endswith(" worker") and pid != workers[0]
                for pid, cmd in children_of(run.pid).items()
            ),
            30,
            "the dead worker was not restarted",
        )
        wait_for(lambda: get_json(f"{base}/readyz")[0] == 200, 60, "not ready after restart")
        everything = list(children_of(run.pid))
        # SIGTERM stops all of them cleanly.
        run.send_signal(signal.SIGTERM)
        assert run.wait(60) == 0
        wait_for(lambda: not any(alive(pid) for pid in everything), 10, "orphans left")
    finally:
        if run.poll() is None:
            run.kill()
        log.close()
    output = (tmp_path / "run.log").read_text()
    assert f"open http://127.0.0.1:{port}/" in output
    assert "restarting" in output
