"""`chattts-online run`: embedded Redis (unless a URL is given), a web and worker processes.

Children are separate OS processes in process groups of their own, restarted when they die,
stopped in order on Ctrl-C or SIGTERM (workers and web, then Redis last); on Linux each child also
dies with the supervisor (PR_SET_PDEATHSIG), so none is orphaned.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from redis.exceptions import RedisError

from cli import running
from cli.check import masked_settings
from core.infra.embedded_redis import EmbeddedRedis, die_with_parent
from core.infra.ports import PORT_IN_USE_EXIT, port_in_use_message, port_taken
from core.infra.redis_client import connect_sync, mask_url
from core.infra.settings import Settings
from core.infra.worker_sections import worker_name
from core.queue.fleet import queue_leave
from core.queue.keys import Keys
from workers.engines import chosen_engine

log = logging.getLogger("chattts_online.run")

# A child that keeps dying is restarted with growing pauses, never in a tight loop.
RESTART_BACKOFF_S = (0.5, 1, 2, 5, 10)
# A child that lived this long is considered healthy again: its back-off resets.
HEALTHY_AFTER_S = 30.0
POLL_S = 0.2


@dataclass
class Child:
    name: str
    argv: list[str]
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    failures: int = 0
    next_start: float = 0.0

    def start(self) -> None:
        self.process = subprocess.Popen(
            self.argv,
            env=self.env,
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent if sys.platform == "linux" else None,
            # Its own process group: a terminal's Ctrl-C (SIGINT to the foreground group)
            # reaches the supervisor alone, which stops the children in order (stop()).
            process_group=0,
        )
        self.started_at = time.monotonic()
        log.info("started %s (pid %d)", self.name, self.process.pid)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


class Supervisor:
    def __init__(self, settings: Settings, workers: int = 1) -> None:
        self.settings = settings
        self.n_workers = workers
        self.redis: EmbeddedRedis | None = None
        self.children: list[Child] = []
        self._stop = False

    def _stop_signal(self, signum: int, _frame: object) -> None:
        """The first Ctrl-C (or SIGTERM) stops everything gracefully, the second hands the
        worker's jobs back at once (the children, in process groups of their own, hear of it
        from here alone)."""
        if self._stop:
            print("\n  Stopping now: the worker hands its jobs back to the queue.", flush=True)
            for child in self.children:
                if child.name != "web" and child.alive() and child.process is not None:
                    child.process.send_signal(signal.SIGTERM)
            return
        log.info("received %s: stopping", signal.Signals(signum).name)
        grace = self.settings.worker.shutdown_grace_s
        print(
            f"\n  Stopping: the worker finishes the jobs it holds (up to {grace:.0f} s; a "
            "document goes back to the queue at once and resumes later).\n"
            "  Ctrl-C again to hand everything back now.",
            flush=True,
        )
        self._stop = True

    def start(self) -> None:
        settings = self.settings
        if port_taken(settings.web.host, settings.web.port):
            raise PortInUse(port_in_use_message(settings.web.port))
        if not settings.redis.redis_url:
            self.redis = EmbeddedRedis(Path(settings.data_dir) / "redis").start()
            settings = settings.replace(redis_url=self.redis.url)
            self.settings = settings
            log.info(
                "embedded Redis on %s, data in %s", mask_url(self.redis.url), self.redis.data_dir
            )
        if not settings.store.audio_store:  # one machine: finished audio on its disk, not in Redis
            audio = (Path(settings.data_dir) / "audio").resolve()
            settings = self.settings = settings.replace(audio_store=f"file://{audio}")
            log.info("audio store in %s", audio)
        self.children = self.plan()
        for child in self.children:
            child.start()

    def plan(self) -> list[Child]:
        """The children to start: the web process, then the workers, each with its environment."""
        env = {**os.environ, **self.settings.to_env()}
        # glibc gives each thread that allocates an arena of its own: a worker's thread pool then
        # grows about 15 KB a job in fragments, flat with two (a day's soak, docs/operations.md).
        env.setdefault("MALLOC_ARENA_MAX", "2")
        env.pop("CHATTTS_WORKER_NAME", None)  # each worker names itself (host-pid)
        cli = [sys.executable, "-m", "cli"]
        children = [Child("web", [*cli, "web"], env)]
        base = self.settings.worker.worker_metrics_port
        for i in range(1, self.n_workers + 1):
            # Worker i serves /metrics on base + i - 1, so that workers of one host never collide.
            port = base + i - 1 if base > 0 else 0
            worker_env = {**env, "CHATTTS_WORKER_METRICS_PORT": str(port)}
            children.append(Child(f"worker-{i}", [*cli, "worker"], worker_env))
        return children

    def supervise(self) -> None:
        """Restart dead children until asked to stop."""
        while not self._stop:
            now = time.monotonic()
            for child in self.children:
                if child.alive():
                    if child.failures and now - child.started_at > HEALTHY_AFTER_S:
                        child.failures = 0
                    continue
                if child.next_start == 0.0:
                    code = child.process.returncode if child.process else None
                    if child.name == "web" and code == PORT_IN_USE_EXIT:
                        raise PortInUse(port_in_use_message(self.settings.web.port))
                    if child.name != "web" and code != 0 and child.process is not None:
                        self._forget_worker(child)
                    delay = RESTART_BACKOFF_S[min(child.failures, len(RESTART_BACKOFF_S) - 1)]
                    if code == 0:  # it was asked to stop (an operator's drain): a new one
                        log.info("%s stopped (drained); starting another", child.name)
                    else:
                        log.error(
                            "%s exited with code %s; restarting in %.1fs", child.name, code, delay
                        )
                        child.failures += 1
                    child.next_start = now + delay
                elif now >= child.next_start:
                    child.next_start = 0.0
                    child.start()
            redis_process = self.redis.process if self.redis is not None else None
            if self.redis is not None and redis_process and redis_process.poll() is not None:
                log.error("embedded Redis exited (%s); restarting it", redis_process.returncode)
                self.redis.start()
            time.sleep(POLL_S)

    def _forget_worker(self, child: Child) -> None:
        """A worker that died without leaving (killed, crashed) leaves the fleet now: else it
        stays listed, ready and holding its job, until its heartbeat lapses."""
        assert child.process is not None
        name = worker_name(child.process.pid)  # plan() leaves each worker to name itself
        keys = Keys(self.settings.redis.key_prefix, self.settings.redis.queue)
        try:
            client = connect_sync(self.settings.redis.redis_url or "", socket_timeout=2)
            try:
                with client.pipeline(transaction=False) as pipe:
                    queue_leave(pipe, keys, name)
                    pipe.execute()
            finally:
                client.close()
        except RedisError as exc:  # its heartbeat lapses on its own
            log.warning("could not remove the dead worker %s from the fleet: %s", name, exc)

    def stop(self) -> None:
        for child in self.children:
            if child.alive() and child.process is not None:
                child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.settings.worker.shutdown_grace_s + 5
        for child in self.children:
            if child.process is None:
                continue
            try:
                child.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop in time: killing it", child.name)
                child.process.kill()
                child.process.wait()
        if self.redis is not None:
            self.redis.stop()
        log.info("all processes stopped")

    def wait_web_ready(self, timeout: float = 60.0) -> bool:
        url = f"http://{self._display_host()}:{self.settings.web.port}/healthz"
        deadline = time.monotonic() + timeout
        web = self.children[0].process if self.children else None
        while time.monotonic() < deadline and not self._stop:
            if web is not None and web.poll() == PORT_IN_USE_EXIT:  # taken since start() looked
                raise PortInUse(port_in_use_message(self.settings.web.port))
            try:
                with urllib.request.urlopen(url, timeout=1) as response:
                    if response.status == 200:
                        return True
            except OSError:
                time.sleep(0.2)
        return False

    def _display_host(self) -> str:
        host = self.settings.web.host
        return "127.0.0.1" if host in ("0.0.0.0", "::", "") else host


def _voices_line(settings: Settings) -> str:
    """What the first voice heard will be: eSpeak NG stands in until ChatTTS can run here."""
    name, fallback = chosen_engine(settings)
    if name != "espeak":
        return f"  Voices: {name}\n"
    why = f" ({fallback})" if fallback else ""
    return (
        f"  Voices: eSpeak NG, built in; ChatTTS is not running{why}.\n"
        "  To speak with ChatTTS: make install-chattts, then .venv/bin/chattts-online models pull\n"
        "  (docs/engines.md)\n"
    )


class PortInUse(Exception):
    """The web port is taken: `run` says so in one line and stops everything it started."""


def main(settings: Settings, workers: int = 1) -> int:
    supervisor = Supervisor(settings, workers)
    signal.signal(signal.SIGTERM, supervisor._stop_signal)
    signal.signal(signal.SIGINT, supervisor._stop_signal)
    try:
        return _serve(supervisor)
    except PortInUse as exc:
        log.error("%s", exc)
        return PORT_IN_USE_EXIT
    finally:
        supervisor.stop()


def _serve(supervisor: Supervisor) -> int:
    supervisor.start()
    if supervisor.wait_web_ready():
        settings = supervisor.settings
        page = f"http://{supervisor._display_host()}:{settings.web.port}/"
        # `say`, `submit`, `admin` and `check` find this service from any directory.
        running.announce(page, settings.data_dir, masked_settings(settings))
        print(
            f"\n  ChatTTS Online is running: open {page}\n{_voices_line(settings)}"
            "  (Ctrl-C stops it)\n",
            flush=True,
        )
    try:
        supervisor.supervise()
    finally:
        running.withdraw()
    return 0
