"""bench/failover.py's run on a real Sentinel group (a primary, a replica, three sentinels): with
CHATTTS_REDIS_MIN_REPLICAS=1, no job answered 202 is lost when the primary dies, none ends twice,
and the SSE client sees every end."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import failover
from core.infra.embedded_redis import find_redis_server
from testing.procs import Processes
from testing.topologies import SentinelGroup, redis_server_version


@pytest.fixture
def sentinel_group(tmp_path: Path) -> Iterator[SentinelGroup]:
    version = redis_server_version()
    if version < (7,):
        pytest.skip(f"Redis 7 is needed for sharded pub/sub; {find_redis_server()} is {version}")
    with SentinelGroup(tmp_path / "sentinel") as group:
        yield group


async def test_failover_under_load_loses_no_accepted_job(
    sentinel_group: SentinelGroup, tmp_path: Path
) -> None:
    procs = Processes(tmp_path / "logs")
    args = argparse.Namespace(min_replicas=1, rate=10.0, before=3.0, after=3.0, lag=0.5, workers=2)
    try:
        result = await failover.run_once(sentinel_group, procs, tmp_path, args)
    finally:
        procs.stop_all()
    assert result["accepted"] > 30, result
    assert result["lost"] == 0, result
    assert result["duplicate_terminal_events"] == 0, result
    assert result["not_succeeded"] == 0, result
    assert result["missed_by_sse"] == 0, result
    assert result["server_errors"] == 0 and result["hung_submits"] == 0, result
    assert result["unavailable_s"] is not None, result  # the switch was seen, and ended
