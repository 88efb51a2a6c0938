"""Child processes of a test or a benchmark: own session, killed with us, always stopped, CPU
accounted."""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

_PR_SET_PDEATHSIG = 1
_CLK_TCK = os.sysconf("SC_CLK_TCK")
STOP_TIMEOUT_S = 10.0


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    tier: int  # stopped after every process of a higher tier

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def cpu_s(self) -> float:
        """User + system CPU seconds used so far (all threads), from /proc."""
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return 0.0
        fields = stat.rsplit(")", 1)[1].split()  # fields[0] is field 3 (state)
        return (int(fields[11]) + int(fields[12])) / _CLK_TCK  # utime (14) + stime (15)

    def tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


class Processes:
    """Starts children with their output in `log_dir`; `stop_all` ends every one of them."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.procs: list[Proc] = []

    def start(
        self,
        name: str,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        tier: int = 1,
    ) -> Proc:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_dir / f"{name}.log"
        with log.open("ab") as out:
            popen = subprocess.Popen(
                list(argv),
                env=dict(env) if env is not None else None,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                # Our own process group: a Ctrl-C in the terminal reaches only us; we stop them.
                start_new_session=True,
                # And if we are killed outright, the kernel kills them (Linux).
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
        proc = Proc(name, popen, log, tier)
        self.procs.append(proc)
        return proc

    def check_alive(self) -> None:
        for proc in self.procs:
            if not proc.alive():
                raise RuntimeError(
                    f"{proc.name} (pid {proc.pid}) exited with code {proc.popen.returncode}; "
                    f"its log ends with:\n{proc.tail()}"
                )

    def cpu(self) -> dict[str, float]:
        return {proc.name: proc.cpu_s() for proc in self.procs}

    def stop_all(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Highest tier first (Redis last): SIGTERM, then SIGKILL what is left after `timeout`."""
        for tier in sorted({p.tier for p in self.procs}, reverse=True):
            wave = [p for p in self.procs if p.tier == tier]
            for proc in wave:
                if proc.alive():
                    with contextlib.suppress(ProcessLookupError):
                        proc.popen.terminate()
            deadline = time.monotonic() + timeout
            for proc in wave:
                try:
                    proc.popen.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)  # its group: it and what it forked
                    proc.popen.wait()
        self.procs.clear()


def interrupt(signum: int, _frame: object) -> NoReturn:
    """SIGTERM handler of a benchmark: unwind as on Ctrl-C, so every process gets stopped."""
    raise KeyboardInterrupt(signal.Signals(signum).name)


@contextlib.contextmanager
def bench_run(prefix: str, keep_logs: bool) -> Iterator[tuple[Processes, Path]]:
    """A temporary folder and the child processes of one benchmark run. On the way out every
    process is stopped (a second Ctrl-C cannot skip it); the logs are kept when the run failed
    or `keep_logs`, and their folder is printed."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    procs = Processes(tmp / "logs")
    signal.signal(signal.SIGTERM, interrupt)
    ok = False
    try:
        yield procs, tmp
        ok = True
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        procs.stop_all()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if ok and not keep_logs:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"logs in {tmp / 'logs'}", file=sys.stderr)
