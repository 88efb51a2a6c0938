"""Graceful shutdown of a real web process mid-job: streams close promptly, clients resume.

SIGTERM a web process while a job streams its events to SSE (one job's stream and the client's
stream) and WebSocket subscribers: every connection ends within the shutdown timeout, the process
exits 0, and a new web process serves the rest after each client's cursor (SSE Last-Event-ID,
WebSocket `after`): together, every event of the stream, in order, exactly once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import aiohttp
from aiohttp import WSMsgType

from core.infra.settings import Settings
from core.queue.job import TERMINAL_STATES
from core.queue.keys import Keys
from core.queue.store import Queue
from tests.conftest import WorkerProcess
from tests.web import webproc
from tests.web.conftest import sse_events
from tests.web.webproc import WebProcess
from web.clients.identity import key_client

start_web = webproc.start_web  # a fixture

AUTH = {"Authorization": "Bearer shutdown-test"}
SECRET = "shutdown-test-cookie-secret"
CLIENT = key_client(SECRET.encode(), "shutdown-test")
TERMINAL = {state.value for state in TERMINAL_STATES}
TEXT = " ".join(f"Sentence {i} keeps the worker busy for a while longer." for i in range(60))
CLOSE_S = 3.0  # streams end this soon after SIGTERM (the process's shutdown timeout: 5 s)


class Reader:
    """(id, type) of each event of the job one connection received, and when it ended."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.ended_at: float | None = None

    @property
    def cursor(self) -> str | None:
        return self.events[-1][0] if self.events else None


class SseReader(Reader):
    """Reads one SSE stream in the background until the job's terminal event or the end."""

    def __init__(self, response: aiohttp.ClientResponse, job_id: str) -> None:
        super().__init__()
        self.job_id = job_id
        self.task = asyncio.create_task(self._read(response))

    async def _read(self, response: aiohttp.ClientResponse) -> None:
        try:
            async for event in sse_events(response):
                if event.id is not None and event.json()["job"].get("id") == self.job_id:
                    self.events.append((event.id, event.event))
                    if event.event in TERMINAL:
                        return
        except aiohttp.ClientError:
            pass
        finally:
            self.ended_at = time.monotonic()


class WsReader(Reader):
    """One WebSocket subscribed to the job, read in the background."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, job_id: str) -> None:
        super().__init__()
        self.ws = ws
        self.task = asyncio.create_task(self._read(job_id))

    async def _read(self, job_id: str) -> None:
        try:
            async for msg in self.ws:
                if msg.type != WSMsgType.TEXT:
                    continue
                frame = msg.json()
                if frame.get("type") == "event" and frame["job_id"] == job_id:
                    self.events.append((frame["id"], frame["event"]["type"]))
                    if frame["event"]["type"] in TERMINAL:
                        return
        finally:
            self.ended_at = time.monotonic()


async def wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.02)


async def open_readers(
    session: aiohttp.ClientSession, web: WebProcess, job_id: str, cursors: list[str | None]
) -> tuple[SseReader, SseReader, WsReader]:
    """The job's SSE stream, the client's SSE stream and a WebSocket, each after its cursor."""
    readers: list[SseReader] = []
    for path, cursor in ((f"/v1/tts/jobs/{job_id}/events", cursors[0]), ("/v1/events", cursors[1])):
        headers = {**AUTH, **({"Last-Event-ID": cursor} if cursor else {})}
        response = await session.get(f"{web.url}{path}", headers=headers)
        assert response.status == 200, await response.text()
        readers.append(SseReader(response, job_id))
    ws = await session.ws_connect(f"{web.url}/v1/ws", headers=AUTH)
    await ws.send_json({"op": "subscribe", "job_id": job_id, "after": cursors[2]})
    return readers[0], readers[1], WsReader(ws, job_id)


async def test_sigterm_mid_job_then_resume_on_a_new_process(
    start_web: Callable[..., WebProcess],
    start_worker: Callable[..., WorkerProcess],
    settings: Settings,
    keys: Keys,
    aredis: Any,
) -> None:
    first = start_web(api_keys="shutdown-test", cookie_secret=SECRET)
    async with aiohttp.ClientSession() as session:
        response = await session.post(
            f"{first.url}/v1/tts/jobs", json={"text": TEXT, "voice": "en_male"}, headers=AUTH
        )
        assert response.status == 202
        job_id = (await response.json())["id"]
        before = await open_readers(session, first, job_id, [None, None, None])
        start_worker()
        # Mid-job: the worker has started streaming segments.
        await wait_until(
            lambda: all(any(t == "progress" for _, t in r.events) for r in before),
            30,
            "no progress event reached every subscriber",
        )
        first.terminate()
        stopped_at = time.monotonic()
        await wait_until(
            lambda: all(r.ended_at is not None for r in before), CLOSE_S, "streams still open"
        )
        assert before[2].ws.close_code == 1001  # going away: reconnect and resubscribe
        assert first.process.wait(10) == 0
        assert all((r.ended_at or 0) >= stopped_at for r in before), "ended before SIGTERM"
        assert not any(t in TERMINAL for r in before for _, t in r.events), "not mid-job"

        second = start_web(port=first.port, api_keys="shutdown-test", cookie_secret=SECRET)
        after = await open_readers(session, second, job_id, [r.cursor for r in before])
        async with asyncio.timeout(60):
            await asyncio.gather(*(r.task for r in after))
        await after[2].ws.close()

    queue = Queue(aredis, settings)
    streams = [keys.job_events(job_id), keys.client_events(CLIENT)]
    for i, stream in enumerate([*streams, streams[0]]):  # the WebSocket follows the job stream
        stored = [(sid, e["type"]) for sid, e in await queue.events.after(stream, None, 10_000)]
        got = before[i].events + after[i].events
        assert got == stored, f"reader {i}: {len(got)} events, stream has {len(stored)}"
        assert before[i].events and after[i].events and got[-1][1] == "succeeded"
