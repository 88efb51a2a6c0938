"""Redis goes away: fast 503s, honest probes, waiting streams; it comes back: all recovers."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import WorkerProcess
from workers.embedded_redis import EmbeddedRedis

from .conftest import ClientFactory, sse_events, submit, wait_job


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(tmp_path / "own-redis").start()
    yield server
    server.stop()


async def test_redis_down_then_back(
    make_client: ClientFactory,
    start_worker: Callable[..., WorkerProcess],
    own_redis: EmbeddedRedis,
) -> None:
    client = await make_client(redis_url=own_redis.url)
    start_worker(CHATTTS_REDIS_URL=own_redis.url)
    stream = await client.get("/v1/events")
    assert stream.status == 200
    seen: list[dict[str, Any]] = []

    async def read_stream() -> None:
        async for event in sse_events(stream):
            seen.append(event.json())

    reader = asyncio.create_task(read_stream())
    before = await submit(client, text="Before the outage.", voice="en_male")
    await wait_job(client, before["id"], ("succeeded",))

    own_redis.stop()
    started = time.monotonic()
    response = await client.post("/v1/tts/jobs", json={"text": "during"})
    assert time.monotonic() - started < 3.0
    assert response.status == 503
    assert response.headers["Retry-After"]
    error = (await response.json())["error"]
    assert error["type"] == "server_error" and error["code"] == "store_unavailable"
    for method, path in [
        ("GET", f"/v1/tts/jobs/{before['id']}"),
        ("GET", f"/v1/tts/jobs/{before['id']}/audio"),
        ("GET", "/v1/voices"),
        ("GET", f"/tts/query/{before['id']}"),
    ]:
        started = time.monotonic()
        response = await client.request(method, path)
        assert response.status == 503, path
        assert time.monotonic() - started < 3.0, path
    assert (await client.get("/healthz")).status == 200
    ready = await client.get("/readyz")
    assert ready.status == 503 and (await ready.json())["redis"] is False
    async with client.ws_connect("/v1/ws") as ws:
        await ws.send_json({"op": "submit", "ref": 1, "request": {"text": "during"}})
        reply = await ws.receive_json(timeout=5)
        assert reply["type"] == "error" and reply["error"]["code"] == "store_unavailable"

    own_redis.start()
    deadline = time.monotonic() + 15
    while True:
        response = await client.post("/v1/tts/jobs", json={"text": "After the outage."})
        if response.status == 202:
            break
        assert time.monotonic() < deadline, await response.text()
        await asyncio.sleep(0.2)
    after = await response.json()
    await wait_job(client, after["id"], ("succeeded",), timeout=30)
    # The stream opened before the outage delivers the new job's events, without a reconnect.
    async with asyncio.timeout(10):
        while not any(e["type"] == "succeeded" and e["job"]["id"] == after["id"] for e in seen):
            await asyncio.sleep(0.05)
    reader.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await reader
    stream.close()
    # The event hub is back on pub/sub too (it retries with a capped back-off).
    deadline = time.monotonic() + 10
    while (ready := await client.get("/readyz")).status != 200 or not (await ready.json())[
        "events"
    ]:
        assert time.monotonic() < deadline, await ready.text()
        await asyncio.sleep(0.1)
    metrics = await (await client.get("/metrics")).text()
    assert "chattts_hub_reconnects_total 1.0" in metrics
