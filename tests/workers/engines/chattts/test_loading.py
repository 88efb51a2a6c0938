"""A ChatTTS worker loading its model: its heartbeat says so, readiness does not count it, and it
joins the consumer group only once it can synthesize."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import orjson
import redis

from core.queue.keys import CONSUMER_GROUP, Keys
from tests.conftest import WorkerProcess
from tests.workers.engines.chattts.service import WORKER_ENV, MakeClient, _settings


async def test_a_loading_worker_is_alive_not_ready(
    redis_url: str, tiny_checkpoint: Path, tmp_path: Path, make_client: MakeClient
) -> None:
    settings = _settings(redis_url, tiny_checkpoint, tmp_path)
    keys = Keys(settings.redis.key_prefix, settings.redis.queue)
    client = await make_client(settings)
    worker = WorkerProcess(settings, "loader", tmp_path / "loader.log", **WORKER_ENV)
    sync = redis.Redis.from_url(redis_url)
    seen: list[dict[str, Any]] = []
    try:
        deadline = time.monotonic() + 120
        while True:  # every heartbeat until the first ready one
            raw = sync.get(keys.worker("loader"))
            if raw is not None:
                beat = orjson.loads(raw)
                if not seen or seen[-1]["state"] != beat["state"]:
                    seen.append(beat)
                    if beat["state"] == "loading":
                        body = await (await client.get("/readyz")).json()
                        assert body["workers"] == 0 and body["workers_loading"] == 1, body
                        consumers: Any = (
                            sync.xinfo_consumers(keys.jobs, CONSUMER_GROUP)
                            if sync.exists(keys.jobs)
                            else []
                        )
                        assert all(c["name"] != b"loader" for c in consumers)
                if beat["state"] == "ready":
                    break
            assert worker.process.poll() is None, worker.log()
            assert time.monotonic() < deadline, worker.log()
            await asyncio.sleep(0.02)
        assert [b["state"] for b in seen] == ["loading", "ready"], seen
        assert seen[0]["engine"] == "chattts" and seen[0]["voices"] == []
        body = await (await client.get("/readyz")).json()
        assert body["workers"] == 1 and body["workers_loading"] == 0, body
    finally:
        sync.close()
        worker.stop()
