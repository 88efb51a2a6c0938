"""What one live segment costs the web tier: the Redis commands the web process sends for it (read
from Redis's MONITOR, the web process's own connections only) and its first audio after its text
(a sentence sent with `flush`), over a `/v1/live` session of many segments.

    python -m bench.live_segment [--repo PATH] [--segments 30] [--output PATH]

`--repo` serves the checkout at PATH (another commit's, for a before and after in one run). One
web process and one eSpeak NG worker on an embedded Redis; the session's first segment (which
admits the context's options) is measured apart from the rest.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import redis

from bench.lib import cli, harness
from bench.lib.stack import shipped_limits, start_ours, start_redis, wait_http
from bench.live_modes import LiveSocket, live_socket
from core.infra.settings import Settings
from testing.procs import Processes

SENTENCE = "This is sentence number {n} of the live session, spoken as soon as it ends."


class Monitor:
    """Redis's MONITOR in a thread: every command's client address, counted."""

    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url)
        self.by_client: dict[tuple[str, str], int] = {}
        self.counting = False
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        with self.client.monitor() as monitor, contextlib.suppress(redis.ConnectionError):  # type: ignore[no-untyped-call]
            for command in monitor.listen():
                if self.counting:
                    address = (
                        str(command.get("client_address", ""))
                        + ":"
                        + str(command.get("client_port", ""))
                    )
                    name = str(command.get("command", "")).split(" ", 1)[0].upper()
                    self.by_client[address, name] = self.by_client.get((address, name), 0) + 1


def web_ports(pid: int) -> set[str]:
    """The process's TCP connections on 127.0.0.1, as MONITOR names its clients (read from /proc:
    its sockets' inodes, and the local ports of those inodes)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = str(fd.readlink()) if fd.is_symlink() else ""
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[9] in inodes:
            ports.add(f"127.0.0.1:{int(fields[1].split(':')[1], 16)}")
    return ports


async def session(url: str, segments: int) -> tuple[LiveSocket, list[float]]:
    """Segments one at a time: each sentence sent with `flush`, its audio awaited to its end."""
    firsts: list[float] = []
    async with live_socket(url, "en_female", 7) as socket:
        for n in range(segments):
            ends = sum(1 for kind, _, _ in socket.events if kind == "segment")
            heard = len(socket.arrivals)
            sent = time.perf_counter()
            await socket.send("text", text=SENTENCE.format(n=n), flush=True)
            while sum(1 for kind, _, _ in socket.events if kind == "segment") <= ends:
                socket.changed.clear()
                await asyncio.wait_for(socket.changed.wait(), 30)
            firsts.append(1000 * (socket.arrivals[heard][0] - sent))
        return socket, firsts


def measure(args: argparse.Namespace, procs: Processes, tmp: Path) -> dict[str, Any]:
    repo = Path(args.repo).resolve()
    redis_url = start_redis(procs, tmp)
    ours = start_ours(procs, redis_url, tmp, repo=repo, **shipped_limits())
    url, web = ours.url, ours.web
    worker = Settings.of(redis_url=redis_url, engine="espeak", data_dir=str(tmp / "w"))
    env = {**os.environ, **worker.to_env(), "CHATTTS_WORKER_METRICS_PORT": "0"}
    procs.start("worker", [sys.executable, "-m", "cli", "worker"], env, cwd=repo)
    wait_http(procs, f"{url}/readyz")
    asyncio.run(session(url, 2))  # warm: the first segment of a process loads what it needs
    monitor = Monitor(redis_url)
    time.sleep(0.5)
    monitor.counting = True
    _, firsts = asyncio.run(session(url, args.segments + 1))
    monitor.counting = False
    ports = web_ports(web.popen.pid)
    kinds: dict[str, int] = {}
    for (client, name), count in monitor.by_client.items():
        if client in ports:
            kinds[name] = kinds.get(name, 0) + count
    commands = sum(kinds.values())
    # The session's own (its upgrade's leases, its first segment's admission) besides its
    # segments': the per-segment figure is the whole divided by the segments, first included.
    return {
        "repo": str(repo),
        "segments": args.segments + 1,
        "web_redis_commands_per_segment": round(commands / (args.segments + 1), 1),
        "first_segment_first_audio_ms": round(firsts[0], 1),
        "later_segments_first_audio_p50_ms": round(statistics.median(firsts[1:]), 1),
        "later_segments_first_audio_max_ms": round(max(firsts[1:]), 1),
        "web_redis_commands": dict(sorted(kinds.items(), key=lambda kind: -kind[1])),
    }


def main() -> int:
    p = cli.parser("bench.live_segment", __doc__, output="", logs=True, checkout=True)
    p.add_argument("--segments", type=int, default=30, help="segments after the first")
    return harness.run("live-segment-", p.parse_args(), measure)


if __name__ == "__main__":
    sys.exit(main())
