"""Real Redis deployments on loopback for tests and benchmarks: a three-master Redis Cluster, and
a primary with a replica behind three sentinels. Every process is a `redis-server` child.

Both need Redis 7 (sharded pub/sub); `redis_server_version()` tells callers whether to skip.
"""

from __future__ import annotations

import contextlib
import random
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import redis
from redis.crc import key_slot

from core.infra.embedded_redis import die_with_parent, find_redis_server, free_port

START_TIMEOUT_S = 15.0
# Sentinel timings compressed for tests: a primary silent for a second is down, and a failover
# that stalls is retried after three. (Production: 5-30 s, and a minute or more.)
DOWN_AFTER_MS = 1_000
FAILOVER_TIMEOUT_MS = 3_000
MASTER_NAME = "chattts"


def redis_server_version() -> tuple[int, ...]:
    out = subprocess.run(
        [find_redis_server(), "--version"], capture_output=True, text=True, check=True
    ).stdout
    found = re.search(r"v=(\d+)\.(\d+)\.(\d+)", out)
    return tuple(int(n) for n in found.groups()) if found else (0,)


def cluster_port() -> int:
    """A free port whose cluster bus port (10000 above it) is free too: at most 55535."""
    for _ in range(200):
        port = random.randint(20_000, 55_000)
        try:
            for candidate in (port, port + 10_000):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", candidate))
        except OSError:
            continue
        return port
    raise RuntimeError("no free port pair for a cluster node")


class Node:
    """One redis-server (or sentinel) process with its own directory and port."""

    def __init__(
        self, directory: Path, args: list[str], sentinel: bool = False, port: int | None = None
    ) -> None:
        self.directory = directory
        self.port = port or free_port()
        self.args = args
        self.sentinel = sentinel
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> Node:
        self.directory.mkdir(parents=True, exist_ok=True)
        conf = self.directory / ("sentinel.conf" if self.sentinel else "redis.conf")
        if self.sentinel:
            # Sentinels rewrite their configuration file: it must exist and be writable.
            if not conf.exists():
                conf.write_text("".join(f"{line}\n" for line in self.args))
            command = [find_redis_server(), str(conf), "--sentinel"]
        else:
            conf.write_text("")
            command = [find_redis_server(), str(conf), *self.args]
        command += ["--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory)]
        command += ["--logfile", str(self.directory / "log"), "--daemonize", "no"]
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            preexec_fn=die_with_parent if sys.platform == "linux" else None,
        )
        return self

    def wait_ready(self, password: str | None) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        client = redis.Redis(port=self.port, password=password, socket_timeout=1)
        try:
            while True:
                if self.process is not None and self.process.poll() is not None:
                    raise RuntimeError(f"redis-server on {self.port} exited: {self.log()}")
                try:
                    client.ping()
                    return
                except (redis.ConnectionError, redis.TimeoutError):
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"redis on {self.port} did not answer") from None
                    time.sleep(0.05)
        finally:
            client.close()

    def log(self) -> str:
        path = self.directory / "log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def kill(self) -> None:
        """SIGKILL: the process dies with whatever it has not replicated."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def pause(self) -> None:
        """SIGSTOP: alive but silent, as behind a congested link (its replication lags)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGCONT)  # a paused process cannot act on SIGTERM
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class Cluster:
    """A Redis Cluster of `masters` primaries (no replicas), built with `redis-cli --cluster`."""

    def __init__(self, directory: Path, masters: int = 3) -> None:
        self.password = secrets.token_urlsafe(16)
        args = ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
        args += ["--cluster-node-timeout", "2000", "--appendonly", "yes"]
        args += ["--requirepass", self.password, "--masterauth", self.password]
        self.nodes = [
            Node(directory / f"node{i}", args, port=cluster_port()) for i in range(masters)
        ]

    @property
    def url(self) -> str:
        hosts = ",".join(n.address for n in self.nodes)
        return f"redis+cluster://:{self.password}@{hosts}"

    def start(self) -> Cluster:
        for node in self.nodes:
            node.start()
        for node in self.nodes:
            node.wait_ready(self.password)
        cli = [find_redis_server().replace("redis-server", "redis-cli"), "-a", self.password]
        subprocess.run(
            [*cli, "--no-auth-warning", "--cluster", "create"]
            + [n.address for n in self.nodes]
            + ["--cluster-replicas", "0", "--cluster-yes"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        self.wait_ok()
        return self

    def wait_ok(self) -> None:
        """Until every node says the cluster is up with all 16384 slots served."""
        deadline = time.monotonic() + 30
        for node in self.nodes:
            client = redis.Redis(port=node.port, password=self.password, socket_timeout=1)
            try:
                while True:
                    info = client.cluster("info")
                    if info.get("cluster_state") == "ok" and info.get("cluster_slots_ok") in (
                        16384,
                        "16384",
                    ):
                        break
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"cluster not ok on {node.address}: {info}")
                    time.sleep(0.1)
            finally:
                client.close()

    def node_of(self, key: str) -> Node:
        """The node whose slots include `key`'s."""
        slot = key_slot(key.encode())
        client = redis.Redis(port=self.nodes[0].port, password=self.password)
        try:
            for start, end, primary, *_ in client.cluster("slots"):
                if start <= slot <= end:
                    port = int(primary[1])
                    return next(n for n in self.nodes if n.port == port)
        finally:
            client.close()
        raise LookupError(f"no node serves slot {slot}")

    def stop(self) -> None:
        for node in self.nodes:
            with contextlib.suppress(Exception):
                node.stop()

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class SentinelGroup:
    """A primary, `replicas` replicas and three sentinels watching them (quorum 2)."""

    def __init__(self, directory: Path, replicas: int = 1, sentinels: int = 3) -> None:
        self.password = secrets.token_urlsafe(16)
        common = ["--appendonly", "yes", "--appendfsync", "everysec", "--save", ""]
        common += ["--requirepass", self.password, "--masterauth", self.password]
        self.primary = Node(directory / "primary", common)
        self.replicas = [Node(directory / f"replica{i}", common) for i in range(replicas)]
        self.sentinels = [
            Node(directory / f"sentinel{i}", [], sentinel=True) for i in range(sentinels)
        ]
        self.directory = directory

    @property
    def data_nodes(self) -> list[Node]:
        return [self.primary, *self.replicas]

    @property
    def url(self) -> str:
        hosts = ",".join(s.address for s in self.sentinels)
        return f"redis+sentinel://:{self.password}@{hosts}/{MASTER_NAME}"

    def start(self) -> SentinelGroup:
        self.primary.start().wait_ready(self.password)
        for replica in self.replicas:
            replica.args = [*replica.args, "--replicaof", "127.0.0.1", str(self.primary.port)]
            replica.start().wait_ready(self.password)
        for sentinel in self.sentinels:
            sentinel.args = [
                f"sentinel monitor {MASTER_NAME} 127.0.0.1 {self.primary.port} 2",
                f"sentinel auth-pass {MASTER_NAME} {self.password}",
                f"sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}",
                f"sentinel failover-timeout {MASTER_NAME} {FAILOVER_TIMEOUT_MS}",
                f"sentinel parallel-syncs {MASTER_NAME} 1",
            ]
            sentinel.start().wait_ready(None)
        self.wait_synced()
        return self

    def primary_port(self) -> int:
        """The port the sentinels name as the primary now."""
        for sentinel in self.sentinels:
            if sentinel.process is None or sentinel.process.poll() is not None:
                continue
            client = redis.Redis(port=sentinel.port, socket_timeout=1)
            try:
                host_port: Any = client.sentinel_get_master_addr_by_name(MASTER_NAME)
                if host_port:
                    return int(host_port[1])
            except redis.RedisError:
                continue
            finally:
                client.close()
        raise RuntimeError("no sentinel answers")

    def node(self, port: int) -> Node:
        return next(n for n in self.data_nodes if n.port == port)

    def wait_synced(self, replicas: int | None = None, timeout: float = 30.0) -> None:
        """Until the current primary streams to `replicas` (default: all) online replicas."""
        wanted = len(self.replicas) if replicas is None else replicas
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(redis.RedisError, RuntimeError, StopIteration):
                port = self.primary_port()
                client = redis.Redis(port=port, password=self.password, socket_timeout=1)
                try:
                    info = client.info("replication")
                finally:
                    client.close()
                online = [
                    v
                    for k, v in info.items()
                    if k.startswith("slave") and isinstance(v, dict) and v.get("state") == "online"
                ]
                if info.get("role") == "master" and len(online) >= wanted:
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(f"primary never had {wanted} replica(s) in sync")
            time.sleep(0.1)

    def stop(self) -> None:
        for node in [*self.sentinels, *self.data_nodes]:
            with contextlib.suppress(Exception):
                node.stop()

    def __enter__(self) -> SentinelGroup:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
