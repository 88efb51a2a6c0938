"""`chattts-online run`: embedded Redis, web and worker as real processes, restarts, clean stop."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from cli.supervisor import Supervisor
from core.infra.embedded_redis import free_port
from core.infra.ports import PORT_IN_USE_EXIT
from core.infra.settings import Settings
from tests.support.commands import command, run_env, start_run

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
    settings = Settings.of(redis_url="redis://127.0.0.1:1/0", worker_metrics_port=9300)
    children = Supervisor(settings, workers=3).plan()
    assert [c.name for c in children] == ["web", "worker-1", "worker-2", "worker-3"]
    ports = [c.env["CHATTTS_WORKER_METRICS_PORT"] for c in children[1:]]
    assert ports == ["9300", "9301", "9302"]
    assert all(c.env["MALLOC_ARENA_MAX"] == "2" for c in children)  # memory levels off
    off = Supervisor(settings.replace(worker_metrics_port=0), workers=2).plan()
    assert [c.env["CHATTTS_WORKER_METRICS_PORT"] for c in off[1:]] == ["0", "0"]


def test_run_starts_supervises_and_stops_everything(tmp_path: Path) -> None:
    port = free_port()
    metrics_port = free_port()
    env = run_env(
        tmp_path,
        # Slow enough that a dead worker's heartbeat would list it for seconds.
        CHATTTS_HEARTBEAT_S="2",
        CHATTTS_WORKER_METRICS_PORT=str(metrics_port),
    )
    log = (tmp_path / "run.log").open("wb")
    run = start_run(port, env, log)
    base = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_for(lambda: get_json(f"{base}/readyz")[0] == 200, 60, "never ready")
        except TimeoutError:
            log.flush()
            tail = (tmp_path / "run.log").read_text(errors="replace")[-4000:]
            raise TimeoutError(f"the service never got ready; its log ends:\n{tail}") from None
        kids = children_of(run.pid)
        assert any("redis-server" in cmd for cmd in kids.values())
        assert (tmp_path / "data" / "redis").is_dir()  # its data and AOF live there
        workers = [pid for pid, cmd in kids.items() if cmd.endswith(" worker")]
        webs = [pid for pid, cmd in kids.items() if cmd.endswith(" web")]
        assert len(workers) == 1 and len(webs) == 1
        # From another directory, with no URL and no data directory given, the command line
        # finds this service: its port, its data, its own settings.
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        away = {k: v for k, v in env.items() if k != "CHATTTS_DATA_DIR"}
        cli = [sys.executable, "-m", "cli"]
        said = command([*cli, "say", "Hello.", "-o", "hi.wav"], elsewhere, away)
        assert said.returncode == 0, said.stderr
        assert (elsewhere / "hi.wav").read_bytes()[:4] == b"RIFF"
        checked = command([*cli, "check"], elsewhere, away)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert f"the running service's, at http://127.0.0.1:{port}/" in checked.stdout
        assert f"port = {port}" in checked.stdout
        # Its data directory named relatively, as `make run`'s ./data is: the same service.
        beside = command([*cli, "check"], tmp_path, {**away, "CHATTTS_DATA_DIR": "data"})
        assert beside.returncode == 0, beside.stdout + beside.stderr
        assert "the running service's" in beside.stdout, beside.stdout
        # The worker serves its own metrics on the base port (worker 1).
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=2) as r:
            assert b"chattts_worker_ready 1.0" in r.read()
        # A child that dies is restarted, and leaves the fleet at once: never listed beside
        # its replacement until its heartbeat lapses.
        os.kill(workers[0], signal.SIGKILL)
        wait_for(lambda: get_json(f"{base}/readyz")[1].get("workers") == 0, 1.5, "still listed")
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
        assert not list((tmp_path / "state" / "chattts-online" / "runs").glob("*.json"))
    finally:
        if run.poll() is None:
            run.kill()
        log.close()
    output = (tmp_path / "run.log").read_text()
    assert f"open http://127.0.0.1:{port}/" in output
    assert "restarting" in output


def test_ctrl_c_in_a_terminal_stops_everything_gracefully_redis_last(tmp_path: Path) -> None:
    """A terminal's Ctrl-C is SIGINT to the whole foreground process group. With a document
    running, `run` stops in under 15 s with exit code 0: the worker finishes or hands back its
    job while Redis still answers (no Redis warnings, nothing killed), and a `run` started
    again on the same data finishes the job."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if "REDIS_URL" not in k}
    env.update(
        {
            "CHATTTS_ENGINE": "espeak",
            "CHATTTS_DATA_DIR": str(tmp_path / "data"),
            "CHATTTS_WORKER_METRICS_PORT": "0",
            # Signal checks only: the document's 2,000 s of speech would take the recognizer a
            # minute to hear, and this is about stopping, not hearing.
            "CHATTTS_RECOGNIZER": "none",
        }
    )
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
    base = f"http://127.0.0.1:{port}"

    def start(log_name: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(  # a session of its own: its group is the "foreground" one
            [sys.executable, "-m", "cli", "run", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=(tmp_path / log_name).open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def job_state(job_id: str) -> str:
        with opener.open(f"{base}/v1/tts/jobs/{job_id}", timeout=5) as response:
            return str(json.loads(response.read())["state"])

    run = start("run.log")
    try:
        wait_for(lambda: get_json(f"{base}/readyz")[0] == 200, 60, "the service never got ready")
        text = " ".join(f"Sentence {i} of a long document read aloud." for i in range(900))
        request = urllib.request.Request(
            f"{base}/v1/tts/jobs",
            data=json.dumps({"text": text, "voice": "en_male", "format": "wav"}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with opener.open(request, timeout=5) as response:
            job_id = json.loads(response.read())["id"]
        wait_for(lambda: job_state(job_id) == "running", 30, "the document never started")
        # `check` on the same data finds the running service's embedded Redis by itself.
        checked = check(env)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert "the embedded Redis of `chattts-online run`" in checked.stdout
        everything = list(children_of(run.pid))
        stopped_at = time.monotonic()
        os.killpg(run.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
        assert run.wait(20) == 0
        assert time.monotonic() - stopped_at < 15
        wait_for(lambda: not any(alive(pid) for pid in everything), 10, "orphans left")
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    output = (tmp_path / "run.log").read_text()
    for trouble in ("Redis unavailable", "did not stop in time", "Traceback", "lease"):
        assert trouble not in output, output[-3000:]
    # It said what it waits for, and handed the document back at once rather than finishing it.
    assert "Stopping: the worker finishes the jobs it holds" in output
    assert (
        f"handing 1 jobs back to the queue (stopped; it resumes after its stored parts): {job_id}"
        in output
    )
    assert check(env).returncode == 1  # stopped: nothing to find
    again = start("again.log")
    try:
        wait_for(lambda: job_state(job_id) == "succeeded", 90, "the job did not finish")
        again.send_signal(signal.SIGTERM)
        assert again.wait(30) == 0
    finally:
        if again.poll() is None:
            os.killpg(again.pid, signal.SIGKILL)


def test_a_busy_port_is_one_clear_line_and_nothing_is_left_running(tmp_path: Path) -> None:
    """`run` and `web` on a port something listens on: the one line that says what to do, a
    non-zero exit at once, no traceback, and no Redis or worker started."""
    env = {k: v for k, v in os.environ.items() if "REDIS_URL" not in k}
    env.update({"CHATTTS_ENGINE": "espeak", "CHATTTS_DATA_DIR": str(tmp_path / "data")})
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for command in (["run"], ["web"]):
            extra = {"CHATTTS_REDIS_URL": "redis://127.0.0.1:1"} if command == ["web"] else {}
            started = time.monotonic()
            done = subprocess.run(
                [sys.executable, "-m", "cli", *command, "--port", str(port)],
                cwd=ROOT,
                env={**env, **extra},
                capture_output=True,
                text=True,
                timeout=60,
            )
            output = done.stdout + done.stderr
            assert done.returncode == PORT_IN_USE_EXIT, output
            assert f"port {port} is in use: set CHATTTS_PORT or --port" in output
            assert "Traceback" not in output and time.monotonic() - started < 20
    assert not (tmp_path / "data" / "redis").exists()  # nothing was started


def check(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return command([sys.executable, "-m", "cli", "check", "--ready"], ROOT, env)
