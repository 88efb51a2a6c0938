"""Real Redis deployments started by the tests: a three-master cluster, a primary with a replica
behind three sentinels (testing/topologies.py). Both need Redis 7 (sharded pub/sub)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from core.infra.embedded_redis import find_redis_server
from core.infra.settings import Settings
from testing.topologies import Cluster, SentinelGroup, redis_server_version
from tests.conftest import WorkerProcess
from tests.web.webproc import WebProcess

StartService = Callable[[Settings, str], tuple[WebProcess, WorkerProcess]]


def _require_redis7() -> None:
    version = redis_server_version()
    if version < (7,):
        pytest.skip(f"Redis 7 is needed for sharded pub/sub; {find_redis_server()} is {version}")
    if shutil.which("redis-cli") is None:
        pytest.skip("redis-cli is needed to build a cluster")


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    _require_redis7()
    with Cluster(tmp_path_factory.mktemp("cluster")) as started:
        yield started


@pytest.fixture
def sentinel_group(tmp_path: Path) -> Iterator[SentinelGroup]:
    """A fresh group per test: a failover changes who is primary."""
    _require_redis7()
    with SentinelGroup(tmp_path / "sentinel") as group:
        yield group


@pytest.fixture
def start_service(tmp_path: Path) -> Iterator[StartService]:
    """start(settings, name): a web process and a worker of `settings`, both ready; stopped at
    the end of the test, last started first."""
    started: list[Any] = []

    def start(settings: Settings, name: str) -> tuple[WebProcess, WorkerProcess]:
        web = WebProcess(settings, tmp_path / f"web-{name}.log")
        started.append(web)
        worker = WorkerProcess(settings, name, tmp_path / f"{name}.log")
        started.append(worker)
        return web.wait_ready(), worker.wait_ready()

    yield start
    for process in reversed(started):
        process.stop()
