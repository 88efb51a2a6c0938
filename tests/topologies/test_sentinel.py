"""The service behind Sentinel: it follows a failover, its streams stay open and catch up, and
with CHATTTS_REDIS_MIN_REPLICAS=1 it refuses changes while no replica is in sync. (No job
answered 202 lost when the primary dies under load: tests/bench/test_failover.py.)"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from core.infra.settings import Settings
from testing.topologies import SentinelGroup
from tests.topologies.conftest import StartService
from tests.web.conftest import sse_events
from tests.web.webproc import WebProcess

KEY = "sentinel-test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
# A primary silent for DOWN_AFTER_MS is down; sentinels then elect and promote: a few seconds.
FAILOVER_BUDGET_S = 30.0


@pytest.fixture
def redis_url(sentinel_group: SentinelGroup) -> str:
    return sentinel_group.url


@pytest.fixture
def services() -> Iterator[list[Any]]:
    started: list[Any] = []
    yield started
    for process in reversed(started):
        process.stop()


class ClientEvents:
    """The client's /v1/events stream, read in the background: (type, job id) of each event."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.seen: list[tuple[str, str]] = []
        self.ended = False
        self.task = asyncio.create_task(self._read(response))

    async def _read(self, response: aiohttp.ClientResponse) -> None:
        try:
            async for event in sse_events(response):
                if event.id is not None:
                    self.seen.append((event.event, event.json()["job"]["id"]))
        finally:
            self.ended = True


class SocketFrames:
    """A WebSocket read in the background (so that its pings are answered): every JSON frame."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.frames: list[dict[str, Any]] = []
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for msg in self.ws:
            if msg.type == aiohttp.WSMsgType.TEXT:
                self.frames.append(msg.json())

    def ended(self, job_id: str | None) -> bool:
        return any(
            f.get("type") == "event" and f["job_id"] == job_id and f["event"]["type"] == "succeeded"
            for f in self.frames
        )

    def submitted(self, ref: str) -> str | None:
        found = [f["job"]["id"] for f in self.frames if f.get("type") == "submitted"]
        return found[0] if found and ref else None


async def post_job(session: aiohttp.ClientSession, url: str, text: str) -> tuple[int, Any]:
    async with session.post(f"{url}/v1/tts/jobs", json={"text": text, "voice": "en_male"}) as r:
        return r.status, await r.json()


async def until(check: Callable[[], Any], timeout: float, what: str) -> None:
    """Poll `check` (a function, or a coroutine function) until it says True."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.1)


async def test_web_and_workers_follow_a_failover_and_streams_catch_up(
    sentinel_group: SentinelGroup, settings: Settings, start_service: StartService
) -> None:
    web, _ = start_service(settings.replace(api_keys=KEY), "w1")
    async with aiohttp.ClientSession(headers=AUTH) as session:
        events = ClientEvents(await session.get(f"{web.url}/v1/events"))
        ws = await session.ws_connect(f"{web.url}/v1/ws")
        socket = SocketFrames(ws)
        status, first = await post_job(session, web.url, "Before the failover.")
        assert status == 202
        await until(lambda: ("succeeded", first["id"]) in events.seen, 30, "first job")

        old = sentinel_group.primary_port()
        sentinel_group.node(old).kill()
        killed = time.monotonic()
        answers: list[tuple[int, float]] = []
        while time.monotonic() - killed < FAILOVER_BUDGET_S:
            started = time.monotonic()
            status, body = await post_job(session, web.url, "During the failover.")
            answers.append((status, time.monotonic() - started))
            assert status in (202, 503), body  # the fast 503 of an outage, never a 500
            if status == 503:
                assert body["error"]["code"] == "store_unavailable", body
            if status == 202 and sentinel_group.primary_port() != old:
                break
            await asyncio.sleep(0.1)
        assert answers[-1][0] == 202, "submissions never came back after the failover"
        assert max(latency for _, latency in answers) < 7.0, answers  # no hang on the dead node
        new = sentinel_group.primary_port()
        assert new != old

        # The streams opened before the failover are still open, and carry what follows.
        await ws.send_json({"op": "submit", "ref": "after", "request": {"text": "After it."}})
        await until(lambda: socket.submitted("after") is not None, 10, "no submitted frame")
        job_id = socket.submitted("after")
        await until(lambda: socket.ended(job_id), 30, "late job on the WebSocket")
        await until(lambda: ("succeeded", job_id) in events.seen, 30, "late job on SSE")
        assert not events.ended and not ws.closed
        readiness = await (await session.get(f"{web.url}/readyz")).json()
        assert readiness["topology"]["shape"] == "sentinel"
        assert readiness["topology"]["primary"] == f"127.0.0.1:{new}"
        await ws.close()
        events.task.cancel()
        await socket.task


async def test_too_few_replicas_refuses_changes_before_writing_them(
    sentinel_group: SentinelGroup, settings: Settings, tmp_path: Path, services: list[Any]
) -> None:
    settings = settings.replace(api_keys=KEY, redis_min_replicas=1)
    web = WebProcess(settings, tmp_path / "web.log")
    services.append(web)
    web.wait_ready()
    async with aiohttp.ClientSession(headers=AUTH) as session:
        status, body = await post_job(session, web.url, "With a replica in sync.")
        assert status == 202, body
        replica = sentinel_group.replicas[0]
        replica.kill()

        async def refused() -> bool:
            status, body = await post_job(session, web.url, "Without one.")
            assert status in (202, 503), body
            return status == 503 and body["error"]["code"] == "not_enough_replicas"

        await until(refused, 10, "a submission was accepted with no replica in sync")
        status, body = await post_job(session, web.url, "Still without one.")
        assert status == 503 and "CHATTTS_REDIS_MIN_REPLICAS" in body["error"]["message"]
        readiness = await session.get(f"{web.url}/readyz")
        assert readiness.status == 503
        topology = (await readiness.json())["topology"]
        assert topology["replicas_in_sync"] == 0 and topology["replicas_required"] == 1

        replica.start()
        await asyncio.to_thread(sentinel_group.wait_synced, 1)

        async def accepted() -> bool:
            return (await post_job(session, web.url, "A replica is back."))[0] == 202

        await until(accepted, 10, "submissions never came back with the replica")
