"""End to end through real workers: HTTP submit, SSE events, audio; the subscription race."""

from __future__ import annotations

import asyncio
import contextlib
import io
import random
import re
import time
from collections.abc import Callable
from typing import Any

import aiohttp
import numpy as np
import pytest
import soundfile as sf
from aiohttp.test_utils import TestClient

from tests.conftest import ClientFactory, WorkerProcess
from tests.web.conftest import collect_sse, submit, wait_job

Client = TestClient[Any, Any]
TERMINAL = {"succeeded", "failed", "cancelled", "dead"}


def _decode(data: bytes) -> tuple[np.ndarray, int]:
    samples, rate = sf.read(io.BytesIO(data), dtype="float32")
    return samples, rate


@pytest.mark.parametrize(
    ("text", "voice", "low_s", "high_s"),
    [
        ("你好，欢迎使用在线语音合成服务。今天天气很好。", "zh_female", 1.5, 12.0),
        ("Hello there. This is a short test of the online speech service.", "en_male", 1.5, 10.0),
    ],
)
async def test_submit_sse_audio(
    client: Client, worker: WorkerProcess, text: str, voice: str, low_s: float, high_s: float
) -> None:
    job = await submit(client, text=text, voice=voice)
    response = await client.get(job["events_url"])
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/event-stream")
    events = await collect_sse(response)
    types = [e.event for e in events if e.event != "progress"]
    assert types == ["queued", "running", "succeeded"], [e.event for e in events]
    ids = [e.id for e in events]
    assert all(i and re.fullmatch(r"\d+-\d+", i) for i in ids)
    assert ids == sorted(ids, key=lambda i: tuple(map(int, i.split("-"))))  # type: ignore[union-attr]
    assert events[0].retry is not None  # browsers reconnect quickly
    last = events[-1].json()
    assert last["type"] == "succeeded" and last["job"]["id"] == job["id"]
    assert events[0].json()["job"]["state"] == "queued"

    audio = await client.get(job["audio_url"])
    assert audio.status == 200
    assert audio.headers["Content-Type"] == "audio/wav"
    data = await audio.read()
    assert int(audio.headers["Content-Length"]) == len(data)
    assert audio.headers["Content-Disposition"] == f'inline; filename="tts-{job["id"][:8]}.wav"'
    samples, rate = _decode(data)
    duration = len(samples) / rate
    assert low_s < duration < high_s, duration
    assert float(np.sqrt(np.mean(samples**2))) > 0.01  # not silence
    status = await (await client.get(job["status_url"])).json()
    assert status["state"] == "succeeded"
    assert status["duration_s"] == pytest.approx(duration, abs=0.05)


async def test_audio_formats_range_etag_download(client: Client, worker: WorkerProcess) -> None:
    job = await submit(client, text="Range requests work.", voice="en_female", format="flac")
    await wait_job(client, job["id"], ("succeeded",))
    url = job["audio_url"]
    full = await client.get(url + "?download=1")
    data = await full.read()
    assert full.headers["Content-Type"] == "audio/flac"
    assert full.headers["Content-Disposition"].startswith("attachment;")
    assert full.headers["Accept-Ranges"] == "bytes"
    etag = full.headers["ETag"]
    samples, _ = _decode(data)
    assert samples.size > 0

    part = await client.get(url, headers={"Range": "bytes=10-19"})
    assert part.status == 206
    assert part.headers["Content-Range"] == f"bytes 10-19/{len(data)}"
    assert await part.read() == data[10:20]
    tail = await client.get(url, headers={"Range": "bytes=-5"})
    assert await tail.read() == data[-5:]
    stale = await client.get(url, headers={"Range": "bytes=0-1", "If-Range": '"other"'})
    assert stale.status == 200 and await stale.read() == data
    beyond = await client.get(url, headers={"Range": f"bytes={len(data)}-"})
    assert beyond.status == 416
    assert beyond.headers["Content-Range"] == f"bytes */{len(data)}"
    cached = await client.get(url, headers={"If-None-Match": etag})
    assert cached.status == 304
    head = await client.head(url)
    assert head.status == 200 and int(head.headers["Content-Length"]) == len(data)


async def test_segments_stream_and_replay(client: Client, worker: WorkerProcess) -> None:
    sentence = "This sentence is one of several that make a long text to speak. "
    job = await submit(client, text=sentence * 8, voice="en_male")
    events = await collect_sse(await client.get(job["events_url"]))
    progress = [e.json() for e in events if e.event == "progress"]
    assert len(progress) >= 2
    total = progress[0]["segment"]["total"]
    assert [p["segment"]["index"] for p in progress] == list(range(1, total + 1))
    segment = await client.get(f"{job['status_url']}/segments/1")
    assert segment.status == 200
    samples, _ = _decode(await segment.read())
    assert samples.size > 0
    missing = await client.get(f"{job['status_url']}/segments/{total + 1}")
    assert missing.status == 404
    # A one-segment job has one segment (its file); none has a segment 0.
    one = await submit(client, text="Short.", voice="en_male")
    await collect_sse(await client.get(one["events_url"]))
    for n, says in ((2, "it has 1"), (0, "numbered from 1; it has 1")):
        answer = await client.get(f"{one['status_url']}/segments/{n}")
        error = (await answer.json())["error"]
        assert answer.status == 404 and error["code"] == "segment_not_found", error
        assert says in error["message"], error
    assert (await client.get(f"{one['status_url']}/segments/1")).status == 200

    # Replay after a cursor: only what follows it, by header or query.
    cursor = events[1].id
    assert cursor is not None
    again = await collect_sse(
        await client.get(job["events_url"], headers={"Last-Event-ID": cursor})
    )
    assert [e.id for e in again] == [e.id for e in events[2:]]
    again = await collect_sse(await client.get(job["events_url"] + f"?last_event_id={cursor}"))
    assert [e.id for e in again] == [e.id for e in events[2:]]
    # After the terminal event: 204, so that a browser's EventSource stops reconnecting.
    done = await client.get(job["events_url"], headers={"Last-Event-ID": events[-1].id or ""})
    assert done.status == 204
    bad = await client.get(job["events_url"], headers={"Last-Event-ID": "yesterday"})
    assert bad.status == 400


async def test_client_stream_sees_all_my_jobs(client: Client, worker: WorkerProcess) -> None:
    response = await client.get("/v1/events")
    assert response.status == 200
    first = await submit(client, text="one", voice="en_female")
    second = await submit(client, text="two", voice="en_female")
    wanted = {first["id"], second["id"]}
    finished: set[str] = set()
    from tests.web.conftest import sse_events

    async with asyncio.timeout(20):
        async for event in sse_events(response):
            data = event.json()
            if data["type"] == "succeeded":
                finished.add(data["job"]["id"])
            if finished == wanted:
                break
    response.close()
    # Another client (no cookie) sees none of this client's jobs, only pings.
    async with aiohttp.ClientSession() as other:
        stranger = await other.get(client.make_url("/v1/events"))
        assert stranger.status == 200
        third = await submit(client, text="three", voice="en_female")
        await wait_job(client, third["id"], ("succeeded",))
        lines: list[bytes] = []
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1.5):
                while True:
                    lines.append(await stranger.content.readline())
        assert not [line for line in lines if line.startswith((b"id:", b"data:"))], lines
        stranger.close()


async def test_race_every_subscriber_gets_one_terminal_event(
    make_client: ClientFactory,
    start_worker: Callable[..., WorkerProcess],
    aredis: Any,
    keys: Any,
) -> None:
    client = await make_client(max_active_per_client=1000)
    for _ in range(3):
        start_worker()
    rng = random.Random(7)
    started = time.monotonic()
    connector = aiohttp.TCPConnector(limit=0)
    probes = asyncio.Semaphore(50)
    late = 0  # subscriptions that came after their job had already ended
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(i: int) -> list[dict[str, Any]]:
            nonlocal late
            response = await session.post(
                client.make_url("/v1/tts/jobs"),
                json={"text": f"Job number {i}.", "voice": "en_male" if i % 2 else "zh_male"},
            )
            job = await response.json()
            assert response.status == 202, job
            await asyncio.sleep(rng.uniform(0, 0.05))
            async with probes:  # the test's own Redis client has a 100-connection pool
                # Every fifth subscriber waits for its job to end, so the "subscribed after the
                # job finished" side of the race is exercised however fast the machine is.
                while (
                    i % 5 == 0 and await aredis.hget(keys.job(job["id"]), "state") != b"succeeded"
                ):
                    await asyncio.sleep(0.01)
                late += await aredis.hget(keys.job(job["id"]), "state") == b"succeeded"
            async with session.get(client.make_url(job["events_url"])) as stream:
                assert stream.status == 200
                return [e.json() for e in await collect_sse(stream, timeout=40)]

        results = await asyncio.gather(*(one(i) for i in range(200)))
    elapsed = time.monotonic() - started
    for events in results:
        types = [e["type"] for e in events]
        assert types.count("succeeded") == 1 and types[-1] == "succeeded", types
        assert sum(t in TERMINAL for t in types) == 1
        assert types[0] == "queued" and "running" in types
        assert types.index("running") < types.index("succeeded")
    assert elapsed < 40, elapsed
    assert 0 < late < 200, late  # both sides of the race were exercised


async def test_the_same_request_is_the_same_audio_whoever_sends_it(
    client: Client, worker: WorkerProcess
) -> None:
    """Clients that keep no cookie share no cached result, so each request is made again: on a
    deterministic engine the same voice, seed and text are the same bytes, whatever the worker
    spoke in between."""
    url = client.make_url("/v1/audio/speech")
    body = {"model": "tts-1", "voice": "echo", "seed": 5, "response_format": "pcm"}
    text = "The same words, spoken twice, are the same samples."

    async def speech(**changes: Any) -> tuple[str, bytes]:
        async with (
            aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as session,
            session.post(url, json={**body, "input": text, **changes}) as answer,
        ):
            assert answer.status == 200, await answer.text()
            return answer.headers["x-cache"], await answer.read()

    _, first = await speech()
    await speech(input="Something else in between.", voice="nova")
    cache, second = await speech()
    assert cache == "miss" and len(first) > 24_000
    assert first == second


async def test_a_text_of_two_languages_is_read_by_a_voice_per_language(
    client: Client, worker: WorkerProcess
) -> None:
    english, mandarin = "Home Assistant says hello.", "客厅的灯已经打开。"
    job = await submit(client, text=f"{english} {mandarin}", format="wav")
    done = await wait_job(client, job["id"], ("succeeded",))
    assert done["voice"] == "en_female|zh_female", done
    for n, (text, voice) in enumerate(((english, "en_female"), (mandarin, "zh_female")), 1):
        alone = await submit(client, text=text, voice=voice, format="wav")
        await wait_job(client, alone["id"], ("succeeded",))
        single = await (await client.get(f"/v1/tts/jobs/{alone['id']}/audio")).read()
        segment = await (await client.get(f"{job['status_url']}/segments/{n}")).read()
        assert np.array_equal(_decode(segment)[0], _decode(single)[0]), voice
