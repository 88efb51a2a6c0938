"""A real `python -m cli web` process for tests that need one: its port, pid, memory, log.

In-process test servers share the test's event loop and memory; tests of memory, dead clients,
signals and restarts need the production command in a process of its own.
"""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from core.infra.embedded_redis import free_port
from core.infra.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
_SERVER_ERRORS = re.compile(r'^chattts_http_requests_total\{[^}]*status="5\d\d"\} (\S+)$', re.M)


class WebProcess:
    """One web process on a free port, serving `settings` (its log in `log_path`)."""

    def __init__(
        self,
        settings: Settings,
        log_path: Path,
        port: int | None = None,
        files_limit: int | None = None,
    ) -> None:
        """`files_limit`: the process's open-files limit, soft and hard (a small one runs out)."""
        self.port = port or free_port()
        self.settings = settings.replace(port=self.port)
        self.log_path = log_path
        self._log = log_path.open("ab")
        env = {**os.environ, **self.settings.to_env()}

        def limit_files() -> None:
            if files_limit is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (files_limit, files_limit))

        self.process = subprocess.Popen(
            [sys.executable, "-m", "cli", "web"],
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            preexec_fn=limit_files if files_limit is not None else None,
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_ready(self, timeout: float = 30.0) -> WebProcess:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/healthz", timeout=1) as response:
                    if response.status == 200:
                        return self
            except OSError:
                pass
            if self.process.poll() is not None:
                raise RuntimeError(f"web process exited: {self.log()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"web process not ready: {self.log()}")
            time.sleep(0.05)

    def get(self, path: str) -> str:
        with urllib.request.urlopen(f"{self.url}{path}", timeout=5) as response:
            text: str = response.read().decode()
            return text

    def server_errors(self) -> float:
        """Requests this process answered (or counted) with a 5xx, from its /metrics."""
        return sum(float(n) for n in _SERVER_ERRORS.findall(self.get("/metrics")))

    def gauge(self, name: str) -> float:
        match = re.search(rf"^{name} (\S+)$", self.get("/metrics"), re.M)
        return float(match[1]) if match else 0.0

    def rss_kb(self) -> int:
        """Resident memory of the process, from /proc (Linux)."""
        status = Path(f"/proc/{self.pid}/status").read_text()
        match = re.search(r"^VmRSS:\s+(\d+) kB$", status, re.M)
        assert match, status
        return int(match[1])

    def connections_from(self, peer_ports: set[int]) -> int:
        """Server-side sockets still held open (not yet closed, nor left to the kernel to finish)
        on this process's port, connected to these client ports."""
        count = 0
        for row in Path(f"/proc/{self.pid}/net/tcp").read_text().splitlines()[1:]:
            fields = row.split()
            local, remote, inode = fields[1], fields[2], fields[9]
            if (
                int(local.rpartition(":")[2], 16) == self.port
                and int(remote.rpartition(":")[2], 16) in peer_ports
                and inode != "0"  # 0: closed by the process, an orphan the kernel winds down
            ):
                count += 1
        return count

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")[-6000:]

    def terminate(self) -> None:
        self.process.send_signal(signal.SIGTERM)

    def stop(self, timeout: float = 15.0) -> int:
        if self.process.poll() is None:
            self.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        return self.process.returncode


@pytest.fixture
def start_web(settings: Settings, tmp_path: Path) -> Iterator[Callable[..., WebProcess]]:
    """Start real web processes on this test's queue (`changes` override settings)."""
    started: list[WebProcess] = []

    def start(port: int | None = None, **changes: object) -> WebProcess:
        name = f"web{len(started) + 1}.log"
        process = WebProcess(settings.replace(**changes), tmp_path / name, port=port)
        started.append(process)
        return process.wait_ready()

    yield start
    for process in started:
        process.stop()
