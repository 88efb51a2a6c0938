"""Web-only fixtures: the real application on a test server, an SSE parser, small helpers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import ClientResponse
from aiohttp.test_utils import TestClient

from cli.sse import SseEvent, sse_events
from core.infra.settings import Settings
from web.app import create_app
from web.appkeys import COOKIE_SECRET
from web.clients.identity import COOKIE, signed

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
