"""Redis near its maxmemory: the oldest finished jobs go before their TTL and new work keeps
being taken, with a real worker filling a small Redis with finished audio."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

from redis.asyncio import Redis

from core.infra.embedded_redis import EmbeddedRedis
from core.queue.retention import RETAIN_BELOW
from testing.limits import LIMITS_OFF
from tests.conftest import ClientFactory, WorkerProcess
from web.appkeys import THROUGHPUT


async def test_the_oldest_finished_jobs_make_room_before_redis_fills(
    make_client: ClientFactory, start_worker: Callable[..., WorkerProcess], tmp_path: Path
) -> None:
    with EmbeddedRedis(tmp_path / "small", maxmemory="24mb") as server:
        client = await make_client(redis_url=server.url, audio_store="redis", **LIMITS_OFF)
        start_worker(CHATTTS_REDIS_URL=server.url, CHATTTS_AUDIO_STORE="redis")
        redis = Redis.from_url(server.url)
        limit = 24 * 1024**2
        ids, peak = [], 0
        try:
            for n in range(160):  # about 300 KB each (WAV, in Redis): twice what it can hold
                text = f"Sentence number {n}, kept in Redis until it has to go."
                response = await client.post("/v1/tts/jobs", json={"text": text})
                assert response.status == 202, (n, await response.text())
                ids.append((await response.json())["id"])
                peak = max(peak, int((await redis.info("memory"))["used_memory"]))
                await asyncio.sleep(0.2)  # a pace the worker keeps up with
            deadline = time.monotonic() + 60
            while True:
                last = await (await client.get(f"/v1/tts/jobs/{ids[-1]}")).json()
                if last.get("state") == "succeeded" or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.2)
            assert last["state"] == "succeeded", last
            peak = max(peak, int((await redis.info("memory"))["used_memory"]))
            assert peak < limit, peak
            assert client.app[THROUGHPUT].retired_early > 0
            first = await client.get(f"/v1/tts/jobs/{ids[0]}")
            assert first.status == 404  # the oldest went first...
            newest = await client.get(f"/v1/tts/jobs/{ids[-1]}/audio")
            assert newest.status == 200  # ... the newest stay
            used = int((await redis.info("memory"))["used_memory"])
            assert used < limit * (RETAIN_BELOW + 0.1), used
        finally:
            await redis.aclose()
