"""A job reclaimed and started again mid-stream: no reader ever hands a listener audio spliced
from two attempts (the HTTP stream, OpenAI streamed speech, WebSocket audio frames).

The test plays the worker through the queue's own API against a real Redis (the real Lua
scripts fence and reset each attempt), so that the restart lands exactly between chunks: the
first attempt's samples are all 0x0101, the second's 0x0202.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from core.infra.settings import Settings
from core.queue.results import Started
from core.queue.store import Queue
from tests.web.conftest import submit

Client = TestClient[Any, Any]
CHUNK = 4800  # bytes: 0.1 s of 16-bit PCM at 24 kHz
FIRST, SECOND = b"\x01" * CHUNK, b"\x02" * CHUNK


class HandWorker:
    """A worker's side of the queue, step by step: take, chunk, give back, finish."""

    def __init__(self, aredis: Redis, settings: Settings) -> None:
        self.redis = aredis
        self.queue = Queue(aredis, settings)

    async def take(self, job_id: str, timeout: float = 10.0) -> Started:
        await self.queue.ensure_group()
        async with asyncio.timeout(timeout):
            while True:
                for stream, entry, taken_id, _ in await self.queue.work.take("hand", 1):
                    if taken_id == job_id:
                        started = await self.queue.work.start(job_id, entry, "hand", stream=stream)
                        assert isinstance(started, Started), started
                        return started
                await asyncio.sleep(0.02)

    async def chunks(self, job_id: str, started: Started, pcm: bytes, count: int) -> None:
        await self.chunks_from(job_id, started, pcm, 1, count)

    async def chunks_from(
        self, job_id: str, started: Started, pcm: bytes, first: int, last: int
    ) -> None:
        for index in range(first, last + 1):
            ok = await self.queue.work.chunk(job_id, started.token, index, 1, pcm, CHUNK / 48_000)
            assert ok == "ok", ok

    async def restart(self, job_id: str, started: Started, counted: bool = True) -> Started:
        """Given back, then taken again: as a reclaim would (`counted`: the attempt counts), or
        as a worker that shuts down gives its jobs back (the attempt is not counted, so that
        the new run has the same attempt number as the first)."""
        released = await self.queue.work.release(
            job_id,
            started.client,
            started.token,
            "reclaimed" if counted else "worker shutting down",
            count_attempt=counted,
            stream=started.stream,
        )
        assert released
        return await self.take(job_id)

    async def finish(self, job_id: str, started: Started, chunks: int) -> None:
        done = await self.queue.work.complete(
            job_id,
            started.client,
            started.token,
            SECOND * chunks,
            chunks * CHUNK / 48_000,
            24_000,
            stream=started.stream,
        )
        assert done


async def _rest(response: aiohttp.ClientResponse) -> bytes:
    """What else the body brings: up to its end, or up to where the server cut it (the client
    then knows its copy is incomplete)."""
    rest = b""
    async with asyncio.timeout(10):
        while True:
            try:
                piece = await response.content.readany()
            except aiohttp.ClientPayloadError:
                return rest
            if not piece:
                return rest
            rest += piece


async def _restart_after_the_first_chunks(
    hand: HandWorker,
    job_id: str,
    started: Started,
    response: aiohttp.ClientResponse,
    counted: bool = True,
) -> None:
    """Once the listener has the first run's two chunks, the job starts again and its second
    run succeeds: the body must end with the first run's audio alone."""
    body = await response.content.readexactly(2 * CHUNK)
    again = await hand.restart(job_id, started, counted)
    await hand.chunks(job_id, again, SECOND, 3)
    await hand.finish(job_id, again, 3)
    body += await _rest(response)
    assert body == FIRST * 2, "audio of the second attempt was spliced onto the first's"


async def _first_job(client: Client, **request: Any) -> str:
    job = await submit(client, text="Said in two attempts.", voice="en_male", **request)
    return str(job["id"])


@pytest.mark.parametrize("counted", [True, False], ids=["reclaimed", "released"])
async def test_the_http_stream_ends_short_instead_of_splicing(
    client: Client, aredis: Redis, settings: Settings, counted: bool
) -> None:
    hand = HandWorker(aredis, settings)
    job_id = await _first_job(client, format="pcm", stream=True)
    started = await hand.take(job_id)
    await hand.chunks(job_id, started, FIRST, 2)
    response = await client.get(f"/v1/tts/jobs/{job_id}/stream")
    assert response.status == 200
    await _restart_after_the_first_chunks(hand, job_id, started, response, counted)


async def test_openai_streamed_speech_ends_short_instead_of_splicing(
    client: Client, aredis: Redis, settings: Settings
) -> None:
    hand = HandWorker(aredis, settings)
    request = {"model": "tts-1", "input": "Said in two attempts.", "voice": "alloy"}
    request |= {"response_format": "pcm", "stream_format": "audio"}
    answer = asyncio.create_task(client.post("/v1/audio/speech", json=request))
    await hand.queue.ensure_group()
    async with asyncio.timeout(10):  # the job is the one the worker finds in the queue
        while not (taken := await hand.queue.work.take("hand", 1)):
            await asyncio.sleep(0.02)
    stream, entry, job_id, _ = taken[0]
    started = await hand.queue.work.start(job_id, entry, "hand", stream=stream)
    assert isinstance(started, Started), started
    await hand.chunks(job_id, started, FIRST, 2)
    response = await answer
    assert response.status == 200 and response.headers["X-Job-Id"] == job_id
    await _restart_after_the_first_chunks(hand, job_id, started, response)


async def test_websocket_audio_frames_stop_with_an_error_instead_of_splicing(
    client: Client, aredis: Redis, settings: Settings
) -> None:
    hand = HandWorker(aredis, settings)
    job_id = await _first_job(client, format="pcm", stream=True)
    started = await hand.take(job_id)
    async with client.ws_connect("/v1/ws") as ws:
        await ws.send_json({"op": "subscribe", "job_id": job_id, "after": None, "audio": True})
        audio: list[bytes] = []
        frames: list[dict[str, Any]] = []

        async def until(done: Any) -> None:
            async with asyncio.timeout(10):
                while not done():
                    msg = await ws.receive()
                    if msg.type == aiohttp.WSMsgType.BINARY:
                        audio.append(msg.data)
                    else:
                        frames.append(msg.json())

        await hand.chunks(job_id, started, FIRST, 2)
        await until(lambda: len(audio) == 2)
        again = await hand.restart(job_id, started)
        await hand.chunks(job_id, again, SECOND, 3)
        await hand.finish(job_id, again, 3)
        await until(lambda: any(f.get("event", {}).get("type") == "succeeded" for f in frames))
        with_error = [f for f in frames if f.get("type") == "error"]
    assert audio == [FIRST, FIRST], "a chunk of the second attempt was spliced onto the first's"
    assert [f["error"]["code"] for f in with_error] == ["job_restarted"], frames
    assert with_error[0]["job_id"] == job_id


@pytest.mark.parametrize("counted", [True, False], ids=["reclaimed", "released"])
async def test_a_listener_who_comes_after_a_restart_hears_the_new_run_whole(
    client: Client, aredis: Redis, settings: Settings, counted: bool
) -> None:
    """The first run's events are replayed to a late listener, but their chunks are gone: it
    skips them and hears the second run, from its first sample to its last."""
    hand = HandWorker(aredis, settings)
    job_id = await _first_job(client, format="pcm", stream=True)
    started = await hand.take(job_id)
    await hand.chunks(job_id, started, FIRST, 2)
    again = await hand.restart(job_id, started, counted)
    await hand.chunks(job_id, again, SECOND, 1)
    response = await client.get(f"/v1/tts/jobs/{job_id}/stream")  # mid-run: one chunk stored
    assert response.status == 200
    body = await response.content.readexactly(CHUNK)
    await hand.chunks_from(job_id, again, SECOND, 2, 3)
    await hand.finish(job_id, again, 3)
    body += await _rest(response)
    assert body == SECOND * 3
