"""Redis goes away: fast 503s, honest probes, waiting streams; it comes back: all recovers."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from core.infra.embedded_redis import EmbeddedRedis
from tests.conftest import ClientFactory, WorkerProcess
from tests.web.conftest import sse_events, submit, wait_job
from web.monitors import store as throughput
from web.monitors.store import ThroughputMeter


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
    assert time.monotonic() - started < 1.0  # at once: no hanging on a reconnect schedule
    assert response.status == 503
    assert response.headers["Retry-After"]
    error = (await response.json())["error"]
    assert error["type"] == "server_error" and error["code"] == "store_unavailable"
    for method, path in [
        ("GET", f"/v1/tts/jobs/{before['id']}"),
        ("GET", f"/v1/tts/jobs/{before['id']}/audio"),
        ("GET", "/v1/voices"),
        ("GET", f"/tts/query/{before['id']}"),
        ("GET", f"/v1/tts/jobs/{before['id']}/events"),
        ("POST", "/tts/submit"),
    ]:
        started = time.monotonic()
        response = await client.request(method, path, json={"text": "during"})
        assert response.status == 503, path
        assert time.monotonic() - started < 1.0, path
        body = await response.json()
        assert ("detail" in body) if path.startswith("/tts/") else ("error" in body), body
    # What needs no Redis keeps working: liveness, the page and its files, the metrics.
    for path in ("/healthz", "/", "/static/app.js", "/metrics"):
        started = time.monotonic()
        assert (await client.get(path)).status == 200, path
        assert time.monotonic() - started < 1.0, path
    started = time.monotonic()
    ready = await client.get("/readyz")
    assert ready.status == 503 and (await ready.json())["redis"] is False
    assert time.monotonic() - started < 1.0
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


async def test_hung_redis_gets_503_at_once_then_recovers(
    make_client: ClientFactory, own_redis: EmbeddedRedis
) -> None:
    """A Redis that accepts connections but never answers (a frozen server, a partition): each
    command would wait out its socket timeout; once the web's probe sees it, answers are at once."""
    client = await make_client(redis_url=own_redis.url)
    job = await submit(client, text="Before the freeze.")
    assert own_redis.process is not None
    ws = await client.ws_connect("/v1/ws")  # open before the freeze
    os.kill(own_redis.process.pid, signal.SIGSTOP)
    try:
        # Three misses of a second in a row: the store is down. Meanwhile the socket reads
        # (which answers the server's heartbeat pings).
        until = time.monotonic() + throughput.DOWN_AFTER_FAILURES * throughput.PROBE_TIMEOUT_S + 1.5
        while time.monotonic() < until:
            await ws.send_json({"op": "ping"})
            assert (await ws.receive_json(timeout=2))["type"] == "pong"
            await asyncio.sleep(0.2)
        for op in ({"op": "submit", "request": {"text": "during"}}, {"op": "cancel"}):
            started = time.monotonic()
            await ws.send_json({**op, "job_id": job["id"], "ref": 7})
            frame = await ws.receive_json(timeout=2)
            assert frame["type"] == "error" and frame["ref"] == 7, frame
            assert frame["error"]["code"] == "store_unavailable", frame
            assert time.monotonic() - started < 0.5, op
        await ws.send_json({"op": "ping", "ref": 8})
        assert (await ws.receive_json(timeout=2))["type"] == "pong"
        for method, path in [
            ("POST", "/v1/tts/jobs"),
            ("GET", f"/v1/tts/jobs/{job['id']}"),
            ("GET", f"/v1/tts/jobs/{job['id']}/audio"),
            ("DELETE", f"/v1/tts/jobs/{job['id']}"),
            ("GET", "/v1/voices"),
            ("POST", "/tts/submit"),
            ("GET", "/readyz"),
        ]:
            started = time.monotonic()
            response = await client.request(method, path, json={"text": "during"})
            assert response.status == 503, (path, await response.text())
            assert time.monotonic() - started < 0.5, path
        for path in ("/healthz", "/", "/static/app.js", "/metrics"):
            started = time.monotonic()
            assert (await client.get(path)).status == 200, path
            assert time.monotonic() - started < 1.0, path
    finally:
        os.kill(own_redis.process.pid, signal.SIGCONT)
        await ws.close()
    deadline = time.monotonic() + 10
    while (response := await client.post("/v1/tts/jobs", json={"text": "After."})).status != 202:
        assert time.monotonic() < deadline, await response.text()
        await asyncio.sleep(0.1)
    assert (await client.get(f"/v1/tts/jobs/{job['id']}")).status == 200


async def test_probe_verdicts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Errors and timeouts count; a probe late because our own loop was blocked does not."""
    monkeypatch.setattr(throughput, "PROBE_TIMEOUT_S", 0.5)
    monkeypatch.setattr(throughput, "DOWN_AFTER_FAILURES", 2)
    meter = ThroughputMeter()
    outcome: list[str] = []

    async def sample(app: Any) -> None:
        what = outcome.pop(0)
        if what == "error":
            raise RedisConnectionError("refused")
        if what == "hang":
            await asyncio.sleep(10)
        if what == "blocked":
            time.sleep(1.2)  # noqa: ASYNC251 (the whole process stalls: a GC, a blocking call)
            await asyncio.sleep(10)

    monkeypatch.setattr(meter, "sample", sample)
    outcome += ["blocked", "error", "ok", "hang", "hang", "ok"]
    app: Any = None
    verdicts, down = [], []
    for _ in range(6):
        verdicts.append(await meter.probe(app))
        down.append(meter.store_down)
    assert verdicts == [None, False, True, False, False, True]
    assert down == [False, False, False, False, True, False]


async def test_a_full_redis_is_a_clear_503(make_client: ClientFactory, tmp_path: Path) -> None:
    """maxmemory with noeviction: Redis refuses writes; submitters hear why, nothing is lost."""
    with EmbeddedRedis(tmp_path / "small", maxmemory="4mb") as server:
        client = await make_client(redis_url=server.url)
        job = await submit(client, text="Before it filled up.")
        filler = Redis.from_url(server.url)
        try:
            with contextlib.suppress(ResponseError):
                for i in range(1000):
                    await filler.set(f"filler:{i}", b"x" * 65536)
            # The web's once-a-second sample sees it (Redis itself lets scripts write on).
            async with asyncio.timeout(10):
                while (
                    response := await client.post("/v1/tts/jobs", json={"text": "Too many."})
                ).status == 202:
                    await asyncio.sleep(0.2)
            body = await response.json()
            assert response.status == 503, body
            assert body["error"]["code"] == "store_full" and "maxmemory" in body["error"]["message"]
            assert response.headers["Retry-After"]
            assert (await client.get(f"/v1/tts/jobs/{job['id']}")).status == 200
        finally:
            await filler.aclose()
