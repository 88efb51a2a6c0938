"""When a result is stored, by Redis's own account: keyspace notifications seen by a separate
process, timestamped on arrival with the machine's wall clock (the clients' clock too).

    python -m bench.lib.keyspace REDIS_URL    # READY, then "<time.time()> <event> <db> <key>" lines

It turns on `notify-keyspace-events E$l` (key events of string and list commands) and listens to
`set` in databases 0 (ours: `tts:{q}:audio:<id>`, written by the worker's completion script) and
1 (the baseline's `tts:result:<id>`), and to `rpop` in database 1 (the baseline's worker taking
a job off its list with BRPOP). `KeyspaceLog` reads that output back in the benchmark process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from pathlib import Path

import redis

from bench.lib.stats import BenchError

CHANNELS = ("__keyevent@0__:set", "__keyevent@1__:set", "__keyevent@1__:rpop")


def _prioritise() -> str:
    """The observer is an instrument: it runs ahead of the processes it watches where allowed,
    so that its timestamps are not late because the machine's cores were busy."""
    with contextlib.suppress(OSError, AttributeError):
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
        return "SCHED_FIFO"
    with contextlib.suppress(OSError):
        os.nice(-10)
        return "nice -10"
    return "normal"


def observe(url: str) -> None:
    priority = _prioritise()
    client = redis.Redis.from_url(url)
    client.config_set("notify-keyspace-events", "E$l")
    pubsub = client.pubsub()  # type: ignore[no-untyped-call, unused-ignore]  # typed from redis 8.2
    pubsub.subscribe(*CHANNELS)
    confirmed = 0
    out = sys.stdout
    for message in pubsub.listen():  # type: ignore[no-untyped-call, unused-ignore]
        now = time.time()
        if message["type"] == "subscribe":
            confirmed += 1
            if confirmed == len(CHANNELS):
                out.write(f"READY {priority}\n")
                out.flush()
            continue
        if message["type"] != "message":
            continue
        # b"__keyevent@1__:set" -> event "set", database "1"
        channel = message["channel"].decode()
        db, event = channel.removeprefix("__keyevent@").split("__:", 1)
        out.write(f"{now:.6f} {event} {db} {message['data'].decode()}\n")
        out.flush()


class KeyspaceLog:
    """The observer's output file, read as it grows: first `set` time of each key, `rpop`s."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.partial = ""
        self.ready = False
        self.priority = ""  # the observer's scheduling
        self.sets: dict[tuple[str, str], float] = {}  # (db, key) -> first set
        self.pops: list[float] = []  # the baseline's queue: each BRPOP served

    def poll(self) -> None:
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except FileNotFoundError:
            return
        self.offset += len(chunk)
        *lines, self.partial = (self.partial + chunk.decode()).split("\n")
        for line in lines:
            if line.startswith("READY"):
                self.ready = True
                self.priority = line.removeprefix("READY").strip()
                continue
            parts = line.split(" ", 3)
            if len(parts) != 4:
                continue
            ts, event, db, key = float(parts[0]), parts[1], parts[2], parts[3]
            if event == "set":
                self.sets.setdefault((db, key), ts)
            elif event == "rpop" and db == "1":
                self.pops.append(ts)

    async def wait_ready(self, timeout: float = 15.0) -> None:
        async with asyncio.timeout(timeout):
            while not self.ready:
                self.poll()
                await asyncio.sleep(0.02)

    async def stored_at(self, db: str, key: str, timeout: float = 5.0) -> float:
        """When `key` was first set (waits for the observer's line)."""
        deadline = time.monotonic() + timeout
        while (db, key) not in self.sets:
            if time.monotonic() > deadline:
                raise BenchError(f"no keyspace notification for {key} (db {db}) in {timeout}s")
            await asyncio.sleep(0.002)
            self.poll()
        return self.sets[(db, key)]

    def popped_before(self, stored: float, after: float) -> float:
        """The baseline's worker took the job: the last BRPOP between `after` and `stored`."""
        pops = [t for t in self.pops if after <= t <= stored]
        if not pops:
            raise BenchError("no BRPOP seen between a baseline submit and its stored result")
        return pops[-1]


if __name__ == "__main__":
    observe(sys.argv[1])
