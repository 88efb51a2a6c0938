"""Clients that never read a download: a real web process serves one large WAV to dozens of
sockets that take no byte. Its memory stays within the budget, what would pass it is refused with
429, the dead connections are dropped within the write timeout, and then an honest client gets
the file."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from typing import Any

import aiohttp

from core.infra.settings import Settings
from tests.conftest import WorkerProcess
from tests.support.sockets import dead_socket, ports
from tests.web import webproc
from tests.web.webproc import WebProcess
from web.replies.sending import PIECE_BYTES

start_web = webproc.start_web  # a fixture

API_KEY = "never-reads"
READERS = 50
# A long job's WAV: a few MB, so that 50 copies held at once would be hundreds of MB.
TEXT = "A sentence that takes a while to say, spoken slowly and clearly. " * 60
BUDGET = 16 * 1024**2  # per address: every test client is 127.0.0.1


def download(path: str) -> bytes:
    return (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {API_KEY}\r\n\r\n"
    ).encode()


def status_of(sock: socket.socket) -> int | None:
    """The status line's code when the answer has arrived (a refusal is small), else None."""
    sock.setblocking(False)
    try:
        head = sock.recv(64)
    except BlockingIOError:
        return None
    return int(head.split()[1]) if head.startswith(b"HTTP/1.1") else None


async def test_readers_that_never_read_are_bounded_refused_and_dropped(
    start_web: Any, settings: Settings, start_worker: Callable[..., WorkerProcess]
) -> None:
    start_worker(CHATTTS_MAX_TEXT_CHARS="8000")
    web: WebProcess = start_web(
        api_keys=API_KEY, max_text_chars=8000, web_memory_per_address_bytes=BUDGET
    )
    auth = {"Authorization": f"Bearer {API_KEY}"}
    async with aiohttp.ClientSession(headers=auth) as http:
        async with http.post(
            f"{web.url}/v1/tts/jobs", json={"text": TEXT, "voice": "en_male", "format": "wav"}
        ) as answer:
            job = await answer.json()
        deadline = time.monotonic() + 60
        while True:
            async with http.get(f"{web.url}/v1/tts/jobs/{job['id']}") as answer:
                state = await answer.json()
            if state["state"] == "succeeded":
                break
            assert time.monotonic() < deadline, state
            await asyncio.sleep(0.2)
        size = int(state["audio_size"])
        assert size > 4 * 1024**2, size
        path = f"/v1/tts/jobs/{job['id']}/audio"
        async with http.get(f"{web.url}{path}") as warm:  # the first download: buffers warm
            assert len(await warm.read()) == size
        rss_before = web.rss_kb()

        dead = [dead_socket(web.port, download(path)) for _ in range(READERS)]
        try:
            await asyncio.sleep(1.0)
            rss_held = web.rss_kb()
            statuses = [status_of(sock) for sock in dead]
            refused = statuses.count(429)
            # A download holds one piece of the file at a time, not the file: the budget holds
            # about BUDGET / PIECE_BYTES readers at once; the others are refused at once.
            assert set(statuses) <= {200, 429}, statuses
            assert refused >= READERS - BUDGET // PIECE_BYTES - 1, statuses
            # The budget counts the bytes sent; fetching them takes as much again twice over
            # (each concurrent read's Redis connection keeps a buffer of its largest reply, and
            # the reader's copy). Without it: all 50 files at once, over 500 MB.
            assert (rss_held - rss_before) * 1024 < 4 * BUDGET, (rss_before, rss_held)
            async with http.get(f"{web.url}{path}") as meanwhile:
                assert meanwhile.status == 429 and meanwhile.headers["Retry-After"]
                body = await meanwhile.json()
                assert body["error"]["code"] == "too_much_in_flight", body

            # The readers that got their 200 are dropped once a write waits past the write
            # timeout (two pings: 2 s here); their bytes leave the budget with them.
            serving = ports(
                [sock for sock, code in zip(dead, statuses, strict=True) if code != 429]
            )
            deadline = time.monotonic() + 15
            while web.connections_from(serving):
                assert time.monotonic() < deadline, "the dead readers were never dropped"
                await asyncio.sleep(0.2)
            async with http.get(f"{web.url}{path}") as after:
                assert after.status == 200 and len(await after.read()) == size
        finally:
            for sock in dead:
                sock.close()
    assert web.server_errors() == 0


async def _finished(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> dict[str, Any]:
    async with http.post(f"{url}/v1/tts/jobs", json=body) as answer:
        job = await answer.json()
        assert answer.status == 202, job
    deadline = time.monotonic() + 90
    while True:
        async with http.get(f"{url}/v1/tts/jobs/{job['id']}") as answer:
            state: dict[str, Any] = await answer.json()
        if state["state"] == "succeeded":
            return state
        assert state["state"] not in ("failed", "dead", "cancelled"), state
        assert time.monotonic() < deadline, state
        await asyncio.sleep(0.2)


async def test_one_address_is_sent_at_its_rate_over_all_its_downloads(
    start_web: Any, settings: Settings, start_worker: Callable[..., WorkerProcess]
) -> None:
    """Two downloads of one address share its send rate: together they take what their bytes,
    less one burst, take at that rate (a lower bound: a slow machine only adds to it)."""
    rate = 1024**2
    start_worker(CHATTTS_MAX_TEXT_CHARS="8000")
    web: WebProcess = start_web(
        api_keys=API_KEY, max_text_chars=8000, send_rate_per_address_bytes=rate
    )
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {API_KEY}"}) as http:
        state = await _finished(http, web.url, {"text": TEXT, "voice": "en_male"})
        size, path = int(state["audio_size"]), f"{web.url}/v1/tts/jobs/{state['id']}/audio"
        assert size > 2 * rate, size

        async def fetch() -> int:
            async with http.get(path) as answer:
                return len(await answer.read())

        await asyncio.sleep(1.5)  # the polling's bytes are repaid: a full burst
        started = time.monotonic()
        assert await asyncio.gather(fetch(), fetch()) == [size, size]
        took = time.monotonic() - started
    assert took >= 0.9 * (2 * size - rate) / rate, (took, size)
    assert web.server_errors() == 0


async def test_a_document_download_that_is_never_read_is_dropped(
    start_web: Any, settings: Settings, start_worker: Callable[..., WorkerProcess]
) -> None:
    """A document's file is joined from its parts as it is sent: a reader that takes nothing is
    cut off within the write timeout, as a plain file's is."""
    start_worker(CHATTTS_MAX_TEXT_CHARS="500")
    web: WebProcess = start_web(api_keys=API_KEY, max_text_chars=500)
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {API_KEY}"}) as http:
        state = await _finished(http, web.url, {"text": TEXT, "voice": "en_male"})
        assert int(state["audio_size"]) > 4 * 1024**2, state
        path = f"/v1/tts/jobs/{state['id']}/audio"
        dead = [dead_socket(web.port, download(path)) for _ in range(3)]
        try:
            deadline = time.monotonic() + 15
            await asyncio.sleep(0.5)
            assert web.connections_from(ports(dead)), "the downloads never started"
            while web.connections_from(ports(dead)):
                assert time.monotonic() < deadline, "the dead document readers were never dropped"
                await asyncio.sleep(0.2)
            async with http.get(f"{web.url}{path}") as after:
                assert after.status == 200
                assert len(await after.read()) == int(state["audio_size"])
        finally:
            for sock in dead:
                sock.close()
    assert web.server_errors() == 0
