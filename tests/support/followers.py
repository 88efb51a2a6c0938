"""Followers of a job's events over SSE and WebSocket, read while servers come and go."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import aiohttp
from aiohttp import WSMsgType

from cli.sse import sse_events
from core.queue.job import TERMINAL_STATES

TERMINAL = {state.value for state in TERMINAL_STATES}


class Reader:
    """(id, type) of each event of the job one connection received, and when it ended."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.ended_at: float | None = None

    @property
    def cursor(self) -> str | None:
        return self.events[-1][0] if self.events else None


TEXT = " ".join(f"Sentence {i} keeps the worker busy for a while longer." for i in range(60))


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
