"""Shared fixtures: a real Redis server, real worker processes, the real web application.

Every test gets its own queue name, so tests share one Redis server without sharing keys.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis as AsyncRedis

from core.infra.embedded_redis import EmbeddedRedis
from core.infra.redis_client import connect_sync
from core.infra.settings import Settings
from core.queue.keys import Keys
from testing.limits import LIMITS_OFF
from testing.s3_server import CREDENTIALS, S3Server
from web.app import create_app

ROOT = Path(__file__).resolve().parent.parent
# Where `chattts-online run` notes that it runs (cli/running.py): a directory of the test
# session's own, never the user's, for every `run` the tests start and every command that looks.
os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="chattts-state-")
# Compressed intervals: minutes of production timing become fractions of a second.
FAST = {
    "block_ms": 200,
    "lease_ms": 1_500,
    "reclaim_interval_ms": 200,
    "heartbeat_s": 0.3,
    "batch_wait_ms": 10,
    "retry_backoff_ms": 50,
    "job_ttl_s": 600,
    "shutdown_grace_s": 5.0,
    "sse_ping_s": 1.0,
    # Tests of other things submit and connect faster than a person: the limits have their own.
    **LIMITS_OFF,
}


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis | None]:
    """The embedded Redis of `chattts-online run`, unless CHATTTS_TEST_REDIS_URL names one."""
    if os.environ.get("CHATTTS_TEST_REDIS_URL"):
        yield None
        return
    server = EmbeddedRedis(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_url(redis_server: EmbeddedRedis | None) -> str:
    return redis_server.url if redis_server else os.environ["CHATTTS_TEST_REDIS_URL"]


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """An S3-compatible server process; its credentials are in this process's environment (and
    so in the workers' it starts)."""
    os.environ.update(CREDENTIALS)
    server = S3Server(tmp_path_factory.mktemp("s3") / "server.log").start()
    yield server
    server.stop()


@pytest.fixture
async def s3_store_url(s3_server: S3Server) -> str:
    """A fresh bucket on the S3 server, as a CHATTTS_AUDIO_STORE setting."""
    bucket = f"audio-{uuid.uuid4().hex[:12]}"
    await s3_server.create_bucket(bucket)
    return s3_server.url(bucket)


@pytest.fixture
def settings(redis_url: str, tmp_path: Path) -> Settings:
    return Settings.of(
        redis_url=redis_url,
        queue=f"t{uuid.uuid4().hex[:10]}",
        engine="espeak",
        data_dir=str(tmp_path),
        **FAST,  # type: ignore[arg-type]
    )


@pytest.fixture
def keys(settings: Settings) -> Keys:
    return Keys(settings.redis.key_prefix, settings.redis.queue)


@pytest.fixture
async def aredis(settings: Settings) -> AsyncIterator[AsyncRedis]:
    client = AsyncRedis.from_url(settings.redis.redis_url or "")
    yield client
    await client.aclose()


class WorkerProcess:
    """A real `chattts-online worker` process; no /metrics server unless `env` asks for one
    (CHATTTS_WORKER_METRICS_PORT): concurrent test workers would fight over one port."""

    def __init__(self, settings: Settings, name: str, log_path: Path, **env: str) -> None:
        self.name = name
        self.log_path = log_path
        environment = {
            **os.environ,
            **settings.to_env(),
            "CHATTTS_WORKER_NAME": name,
            "CHATTTS_WORKER_METRICS_PORT": "0",
            **env,
        }
        self._log = log_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "cli", "worker"],
            cwd=ROOT,
            env=environment,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self.keys = Keys(settings.redis.key_prefix, settings.redis.queue)
        self.redis_url = environment["CHATTTS_REDIS_URL"]

    def wait_ready(self, timeout: float = 60.0) -> WorkerProcess:
        client = connect_sync(self.redis_url)
        deadline = time.monotonic() + timeout
        try:
            while not self.ready(client.get(self.keys.worker(self.name))):
                if self.process.poll() is not None:
                    raise RuntimeError(f"worker {self.name} exited: {self.log()}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"worker {self.name} not ready: {self.log()}")
                time.sleep(0.05)
        finally:
            client.close()
        return self

    @staticmethod
    def ready(beat: object) -> bool:
        """A heartbeat of a worker that can synthesize (not one still loading its model)."""
        return isinstance(beat, bytes) and orjson.loads(beat).get("state") != "loading"

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")[-4000:]

    def stop(self, timeout: float = 15.0) -> int:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        return self.process.returncode

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()


ClientFactory = Callable[..., Awaitable[TestClient[Any, Any]]]


@pytest.fixture
async def make_client(aiohttp_client: Any, settings: Settings) -> ClientFactory:
    """A test client of create_app(settings with `changes`), served over real HTTP."""

    async def make(**changes: Any) -> TestClient[Any, Any]:
        client: TestClient[Any, Any] = await aiohttp_client(create_app(settings.replace(**changes)))
        return client

    return make


@pytest.fixture
async def client(make_client: ClientFactory) -> TestClient[Any, Any]:
    return await make_client()


@pytest.fixture
def start_worker(settings: Settings, tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    started: list[WorkerProcess] = []

    def start(name: str | None = None, ready: bool = True, **env: str) -> WorkerProcess:
        name = name or f"w{len(started) + 1}"
        worker = WorkerProcess(settings, name, tmp_path / f"{name}.log", **env)
        started.append(worker)
        return worker.wait_ready() if ready else worker

    yield start
    for worker in started:
        worker.stop()


@pytest.fixture
def worker(start_worker: Callable[..., WorkerProcess]) -> WorkerProcess:
    """One ready espeak worker on this test's queue."""
    return start_worker()
