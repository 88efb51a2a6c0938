"""Slow and dead clients: SSE and WebSocket connections that never read while events flow.

A real web process serves dozens of raw sockets (tiny receive buffers) that send their request and
never read a byte, plus one well-behaved SSE reader, while bursts of large events flow. Its
memory (RSS) and its Redis connections stay bounded, the dead connections are dropped within the
write timeout or the WebSocket heartbeat, and the good reader still gets every event.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import time
from collections.abc import Callable
from typing import Any

import aiohttp
import orjson
from redis.asyncio import Redis

from core.infra.settings import Settings
from core.queue.job import SynthesisRequest
from core.queue.keys import Keys
from core.queue.store import Queue
from tests.support.sockets import dead_socket, ports
from tests.web import webproc
from tests.web.conftest import sse_events
from tests.web.webproc import WebProcess
from web.clients.identity import key_client

start_web = webproc.start_web  # a fixture

API_KEY = "slow-and-dead"
SECRET = "slow-clients-cookie-secret"
CLIENT = key_client(SECRET.encode(), API_KEY)
DEAD_SSE, DEAD_WS = 40, 20
BURSTS, PER_BURST = 4, 150
PAD = "x" * 4000  # ~4 KB per event: the buffers of a dead client fill after a few dozen
NAME = "slowweb"  # the web process's Redis connections carry this name (CLIENT LIST)


def sse_request(path: str) -> bytes:
    return (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
        f"Authorization: Bearer {API_KEY}\r\n\r\n"
    ).encode()


def ws_request(job_id: str) -> bytes:
    """The upgrade request and, without waiting for the answer, one masked subscribe frame."""
    key = base64.b64encode(os.urandom(16)).decode()
    head = (
        "GET /v1/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
        f"Authorization: Bearer {API_KEY}\r\n\r\n"
    ).encode()
    payload = orjson.dumps({"op": "subscribe", "job_id": job_id, "after": None})
    mask = os.urandom(4)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    assert len(payload) < 126
    return head + bytes([0x81, 0x80 | len(payload)]) + mask + masked


async def redis_connections(aredis: Redis) -> int:
    clients: Any = await aredis.client_list()
    return sum(1 for c in clients if c.get("name") == NAME)


async def flood(aredis: Redis, keys: Keys, job_id: str, count: int) -> list[str]:
    """`count` progress events on the job's and the client's streams, as the scripts write them."""
    streams = (keys.job_events(job_id), keys.client_events(CLIENT))
    client_ids: list[str] = []
    async with aredis.pipeline(transaction=False) as pipe:
        for i in range(count):
            data = orjson.dumps({"type": "progress", "job": {"id": job_id}, "i": i, "pad": PAD})
            for stream in streams:
                pipe.xadd(stream, {"data": data})
        ids = await pipe.execute()
        for _ in range(count):
            pipe.publish(keys.doorbell, "\n".join(streams))
        await pipe.execute()
    client_ids = [i.decode() for i in ids[1::2]]
    return client_ids


async def wait_for(check: Callable[[], bool], timeout: float, what: Callable[[], str]) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what()
        await asyncio.sleep(0.1)


async def test_dead_clients_are_dropped_and_resources_stay_flat(
    start_web: Any, settings: Settings, keys: Keys, aredis: Redis
) -> None:
    web: WebProcess = start_web(
        redis_url=f"{settings.redis.redis_url}?client_name={NAME}",
        api_keys=API_KEY,
        cookie_secret=SECRET,
    )
    queue = Queue(aredis, settings)
    job_id = (await queue.enqueue(SynthesisRequest(text="never runs"), CLIENT)).job_id
    rss_idle = web.rss_kb()
    got: list[str] = []
    async with aiohttp.ClientSession() as session:
        auth = {"Authorization": f"Bearer {API_KEY}"}
        good = await session.get(f"{web.url}/v1/events", headers=auth)
        assert good.status == 200

        async def read_all() -> None:
            async for event in sse_events(good):
                if event.event == "progress" and event.id is not None:
                    got.append(event.id)

        reader = asyncio.create_task(read_all())
        paths = ("/v1/events", f"/v1/tts/jobs/{job_id}/events")
        dead_sse = [dead_socket(web.port, sse_request(paths[i % 2])) for i in range(DEAD_SSE)]
        dead_ws = [dead_socket(web.port, ws_request(job_id)) for _ in range(DEAD_WS)]
        try:
            await wait_for(
                lambda: (
                    web.gauge("chattts_sse_connections") == DEAD_SSE + 1
                    and web.gauge("chattts_websocket_connections") == DEAD_WS
                ),
                10,
                lambda: "the dead clients never connected",
            )
            sent: list[str] = []
            rss: list[int] = []
            conns: list[int] = []
            for _ in range(BURSTS):
                sent += await flood(aredis, keys, job_id, PER_BURST)
                await asyncio.sleep(0.5)
                rss.append(web.rss_kb())
                conns.append(await redis_connections(aredis))
            # Dead SSE clients: dropped once a write waits past the write timeout (2 pings),
            # their sockets aborted. Dead WebSockets: no pong to the heartbeat, or a full frame
            # queue for two ping periods (as SSE).
            await wait_for(
                lambda: (
                    web.gauge("chattts_sse_connections") == 1
                    and web.connections_from(ports(dead_sse)) == 0
                ),
                10,
                lambda: f"SSE: {web.connections_from(ports(dead_sse))} dead still connected",
            )
            await wait_for(
                lambda: (
                    web.gauge("chattts_websocket_connections") == 0
                    and web.connections_from(ports(dead_ws)) == 0
                ),
                20,
                lambda: f"WebSockets: {web.connections_from(ports(dead_ws))} dead still connected",
            )
            # The good reader got every event, in order, once.
            async with asyncio.timeout(15):
                while len(got) < len(sent):
                    await asyncio.sleep(0.05)
            assert got == sent
            rss.append(web.rss_kb())
            conns.append(await redis_connections(aredis))
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
            for sock in dead_sse + dead_ws:
                sock.close()
            good.close()
    # Flat: later bursts cost no more memory than the first (measured: +40 MB for the first,
    # a few MB after); Redis connections stay within the number of concurrent readers (one
    # pub/sub connection plus a pool that never outgrows its readers) and stop growing.
    assert max(rss) - rss_idle < 120_000, (rss_idle, rss)
    assert max(rss[1:]) - rss[0] < 40_000, rss
    assert max(conns) <= DEAD_SSE + DEAD_WS + 10, conns
    assert conns[-1] <= max(conns[:BURSTS]), conns
    assert web.server_errors() == 0
