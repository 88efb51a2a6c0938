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

from core.infra.settings import Settings
from core.queue.keys import Keys
from core.queue.store import Queue
from tests.conftest import WorkerProcess
from tests.support.followers import TERMINAL, TEXT, SseReader, WsReader, wait_until
from tests.web import webproc
from tests.web.webproc import WebProcess
from web.clients.identity import key_client

start_web = webproc.start_web  # a fixture

AUTH = {"Authorization": "Bearer shutdown-test"}
SECRET = "shutdown-test-cookie-secret"
CLIENT = key_client(SECRET.encode(), "shutdown-test")
CLOSE_S = 3.0  # streams end this soon after SIGTERM (the process's shutdown timeout: 5 s)


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
        # In a thread: this loop keeps answering the WebSocket's pings (a second apart here)
        # while the worker starts.
        await asyncio.to_thread(start_worker)
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
