"""Web-only fixtures: the real application on a test server, an SSE parser, small helpers."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson
from aiohttp import ClientResponse
from aiohttp.test_utils import TestClient

from cli.sse import SseEvent, sse_events
from core.queue.keys import Keys
from web.appkeys import COOKIE_SECRET
from web.clients.identity import COOKIE, signed
from workers.engines.chattts import CAPABILITIES as CHATTTS
from workers.engines.espeak import EspeakEngine


async def collect_sse(response: ClientResponse, timeout: float = 20.0) -> list[SseEvent]:
    """Every event until the server ends the stream."""
    out: list[SseEvent] = []
    async with asyncio.timeout(timeout):
        async for event in sse_events(response):
            out.append(event)
    return out


def cookie(client: TestClient[Any, Any], token: str) -> dict[str, str]:
    """A Cookie header of the identity `token`, signed as this app signs the ones it issues."""
    assert 16 <= len(token) <= 64, "an identity token is 16-64 url-safe characters"
    return {"Cookie": f"{COOKIE}={signed(client.app[COOKIE_SECRET], token)}"}


async def submit(client: TestClient[Any, Any], **request: Any) -> dict[str, Any]:
    response = await client.post("/v1/tts/jobs", json=request)
    body = await response.json()
    assert response.status == 202, body
    return dict(body)


async def wait_job(
    client: TestClient[Any, Any],
    job_id: str,
    states: tuple[str, ...],
    timeout: float = 20.0,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        response = await client.get(f"/v1/tts/jobs/{job_id}", headers=headers)
        body: dict[str, Any] = await response.json()
        if body.get("state") in states:
            return body
        assert time.monotonic() < deadline, f"job {job_id} still {body}"
        await asyncio.sleep(0.05)


async def live_worker(aredis: Any, keys: Keys, engine: str, name: str | None = None) -> None:
    """The heartbeat a live worker of `engine` publishes (its name and capabilities): what the
    web tier reads of the fleet, without running one."""
    name = name or engine
    capabilities = {"espeak": EspeakEngine.capabilities, "chattts": CHATTTS}[engine].public()
    beat = {"name": name, "engine": engine, "capabilities": capabilities}
    await aredis.set(keys.worker(name), orjson.dumps(beat), ex=60)
    await aredis.zadd(keys.workers, {name: time.time()})
