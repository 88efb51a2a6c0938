"""`POST /v1/audio/speech` through the official `openai` client against the real service."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import av
import numpy as np
import openai
import orjson
import pytest
import soundfile as sf
from aiohttp import web
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from core.audio.formats import bare_mp3
from core.infra.settings import Settings
from core.queue.keys import Keys
from core.text.languages import mostly_mandarin
from tests.conftest import ClientFactory, WorkerProcess
from tests.web.conftest import wait_job
from web.app import create_app
from web.appkeys import HUB
from web.schemas.openai import resolve_voice

Client = TestClient[Any, Any]
RATE = 24_000
FORMATS = ("mp3", "opus", "aac", "flac", "wav", "pcm")
MIME = {
    "mp3": "audio/mpeg",
    "opus": "audio/ogg; codecs=opus",
    "aac": "audio/aac",
    "flac": "audio/flac",
    "wav": "audio/wav",
    "pcm": "audio/pcm",
}
LONG = "This sentence is one of several that make a long text to speak. " * 6


def oa(client: Client, key: str = "sk-test") -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key=key, max_retries=0)


def duration(data: bytes, fmt: str) -> float:
    """Seconds of audio in `data`, decoded by libsndfile (soundfile) or, where it cannot, FFmpeg:
    AAC, and a streamed FLAC (whose header says 'length unknown', which libsndfile refuses)."""
    if fmt == "pcm":
        assert len(data) % 2 == 0
        samples = np.frombuffer(data, "<i2").astype(np.float32) / 32767
        assert float(np.sqrt(np.mean(samples**2))) > 0.01  # speech, not silence
        return samples.size / RATE
    if fmt not in ("aac", "flac"):
        samples, rate = sf.read(io.BytesIO(data), dtype="float32")
        assert rate in (RATE, 48_000) and float(np.sqrt(np.mean(samples**2))) > 0.01
        return float(len(samples) / rate)
    with av.open(io.BytesIO(data), "r") as container:
        stream = container.streams.audio[0]
        count = sum(frame.samples for frame in container.decode(stream))
        return float(count / stream.sample_rate)


async def test_every_format_whole(client: Client, worker: WorkerProcess, aredis: Redis) -> None:
    api = oa(client)
    for fmt in FORMATS:
        raw = await api.audio.speech.with_raw_response.create(
            model="tts-1",
            voice="alloy",
            input="Hello from the speech endpoint.",
            response_format=fmt,  # type: ignore[arg-type]
        )
        assert raw.headers["content-type"] == MIME[fmt]
        data = raw.content
        assert 0.8 < duration(data, fmt) < 6.0, fmt
    # The default format is mp3, in the voice the table says; an anonymous caller's job waits in
    # the ordinary lane ("high" is for API keys: tests/core/queue/test_store.py).
    response = await api.audio.speech.create(model="gpt-4o-mini-tts", voice="ash", input="Hi.")
    assert response.response.headers["content-type"] == "audio/mpeg"
    job_id = response.response.headers["x-job-id"]
    stored = orjson.loads(await aredis.hget(worker.keys.job(job_id), "request") or b"")
    assert stored["priority"] == "normal" and stored["voice"] == "en_male"


async def test_streamed_audio_every_format(client: Client, worker: WorkerProcess) -> None:
    api = oa(client)
    for fmt in FORMATS:
        async with api.audio.speech.with_streaming_response.create(
            model="tts-1",
            voice="nova",
            input=LONG,
            response_format=fmt,  # type: ignore[arg-type]
            stream_format="audio",
            extra_body={"cache": False},  # each one really synthesized
        ) as response:
            assert response.headers["content-type"] == MIME[fmt]
            assert response.headers.get("transfer-encoding") == "chunked"
            data = b"".join([chunk async for chunk in response.iter_bytes()])
        assert 10.0 < duration(data, fmt) < 60.0, fmt
        job = await (await client.get(f"/v1/tts/jobs/{response.headers['x-job-id']}")).json()
        assert job["segments_total"] > 1 and job["cached"] is False
        if fmt == "pcm":  # the stream is exactly the job's file: segments and the same pauses
            assert data == await (await client.get(f"/v1/tts/jobs/{job['id']}/audio")).read()
    # A cache hit streams too: the whole file at once, the same bytes.
    streams = []
    for _ in range(2):
        async with api.audio.speech.with_streaming_response.create(
            model="tts-1", voice="nova", input=LONG, response_format="pcm", stream_format="audio"
        ) as again:
            streams.append(await again.read())
    assert streams[0] == streams[1]
    job = await (await client.get(f"/v1/tts/jobs/{again.headers['x-job-id']}")).json()
    assert job["cached"] is True


async def test_sse_stream_as_openai_documents(client: Client, worker: WorkerProcess) -> None:
    api = oa(client)
    async with api.audio.speech.with_streaming_response.create(
        model="gpt-4o-mini-tts",
        voice="marin",
        input=LONG,
        stream_format="sse",
        instructions="Speak cheerfully.",
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = []
        async for line in response.iter_lines():
            if line.startswith("data:"):
                events.append(orjson.loads(line.removeprefix("data:").strip()))
    assert [e["type"] for e in events[:-1]] == ["speech.audio.delta"] * (len(events) - 1)
    assert len(events) > 2  # the audio came in several pieces
    done = events[-1]
    assert done["type"] == "speech.audio.done"
    usage = done["usage"]
    assert usage["input_tokens"] == len(LONG.strip()) and usage["output_tokens"] > 0
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    audio = b"".join(base64.b64decode(e["audio"]) for e in events[:-1])
    assert 10.0 < duration(audio, "mp3") < 60.0


async def test_repeat_is_a_cache_hit_with_identical_bytes(
    client: Client, worker: WorkerProcess
) -> None:
    api = oa(client)
    params: dict[str, Any] = {"model": "tts-1", "voice": "echo", "input": "Cache me if you can."}
    first = await api.audio.speech.with_raw_response.create(**params, response_format="wav")
    second = await api.audio.speech.with_raw_response.create(**params, response_format="wav")
    assert first.headers["x-cache"] == "miss" and second.headers["x-cache"] == "hit"
    assert first.content == second.content
    job = await (await client.get(f"/v1/tts/jobs/{second.headers['x-job-id']}")).json()
    assert job["cached"] is True
    # The job's audio URL serves the same bytes, with Range and ETag.
    url = f"/v1/tts/jobs/{job['id']}/audio"
    part = await client.get(url, headers={"Range": "bytes=4-11"})
    assert part.status == 206 and await part.read() == first.content[4:12]
    etag = part.headers["ETag"]
    assert (await client.get(url, headers={"If-None-Match": etag})).status == 304
    metrics = await (await client.get("/metrics")).text()
    assert "chattts_cache_hits_total 1.0" in metrics
    assert "chattts_cache_hit_ratio 0.5" in metrics


@pytest.mark.parametrize(
    ("body", "param", "code"),
    [
        ({"model": "tts-1", "voice": "alloy"}, "input", "missing_input"),
        ({"input": "hi", "voice": "alloy"}, "model", "missing_model"),
        ({"model": "tts-1", "input": "x" * 4097, "voice": "alloy"}, "input", "text_too_long"),
        ({"model": "tts-1", "input": "  ", "voice": "alloy"}, "input", "text_empty"),
        ({"model": "tts-1", "input": "hi", "voice": "nobody"}, "voice", "unknown_voice"),
        ({"model": "tts-1", "input": "hi", "speed": 4.5}, "speed", "invalid_value"),
        ({"model": "tts-1", "input": "hi", "response_format": "ogg"}, "response_format", None),
        ({"model": "tts-1", "input": "hi", "stream_format": "ws"}, "stream_format", None),
        ({"model": "tts-1", "input": "hi", "stream": "yes"}, "stream", None),
        ({"model": "tts-1", "input": "hi", "streaming": True}, "streaming", "unknown_parameter"),
        ({"model": "tts-1", "input": "hi", "seed": -1}, "seed", None),
        ({"model": "tts-1", "input": "hi", "stream_start": "soon"}, "stream_start", None),
    ],
)
async def test_bad_requests_in_openai_shape(
    client: Client, body: dict[str, Any], param: str, code: str | None
) -> None:
    response = await client.post("/v1/audio/speech", json=body)
    assert response.status == 400
    error = (await response.json())["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param
    assert error["message"] and (code is None or error["code"] == code)
    assert "'text'" not in error["message"]


async def test_openai_client_errors(client: Client) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        await oa(client).audio.speech.create(model="tts-1", voice="nobody", input="hi")
    assert caught.value.status_code == 400
    assert caught.value.code == "unknown_voice" and caught.value.param == "voice"


async def test_api_keys_apply(make_client: ClientFactory, worker: WorkerProcess) -> None:
    client = await make_client(api_keys="k-one,k-two")
    with pytest.raises(openai.AuthenticationError) as caught:
        await oa(client, "wrong").audio.speech.create(model="tts-1", voice="alloy", input="hi")
    assert caught.value.status_code == 401 and caught.value.code == "invalid_api_key"
    anonymous = await client.post("/v1/audio/speech", json={"model": "m", "input": "hi"})
    assert anonymous.status == 401
    assert (await anonymous.json())["error"]["type"] == "authentication_error"
    response = await oa(client, "k-two").audio.speech.create(
        model="tts-1", voice="alloy", input="Hello.", response_format="wav"
    )
    assert duration(response.content, "wav") > 0.3


async def test_failed_job_is_an_error(
    client: Client, aredis: Redis, keys: Keys, start_worker: Callable[..., WorkerProcess]
) -> None:
    """A registered voice removed before the worker starts the job: the job fails."""
    await aredis.hset(keys.voices, "ghost", orjson.dumps({"name": "ghost"}))
    body = {"model": "tts-1", "voice": "ghost", "input": "Boo."}
    whole = asyncio.create_task(client.post("/v1/audio/speech", json=body))
    streamed = asyncio.create_task(
        client.post("/v1/audio/speech", json={**body, "stream_format": "audio"})
    )
    await asyncio.sleep(0.3)
    await aredis.hdel(keys.voices, "ghost")
    start_worker()
    for task in (whole, streamed):
        response = await asyncio.wait_for(task, 20)
        assert response.status == 500
        error = (await response.json())["error"]
        assert error["code"] == "job_failed" and "ghost" in error["message"]
        assert error["type"] == "server_error"


@pytest.mark.parametrize("stream_format", ["audio", "sse"])
async def test_failure_after_audio_breaks_the_stream(
    client: Client, worker: WorkerProcess, stream_format: str
) -> None:
    """Cancelled mid-way: a chunked body ends short (no clean end); SSE ends with an error."""
    body = {"model": "tts-1", "voice": "alloy", "input": LONG * 8, "stream_format": stream_format}
    response = await client.post("/v1/audio/speech", json={**body, "cache": False})
    assert response.status == 200
    first = await response.content.readany()
    assert first
    cancel = await client.delete(f"/v1/tts/jobs/{response.headers['X-Job-Id']}")
    if cancel.status == 409:
        pytest.skip("the job finished before the cancellation landed")
    if stream_format == "audio":
        with pytest.raises(aiohttp.ClientPayloadError):
            await response.read()
        return
    text = first + await response.read()
    last = text.decode().strip().split("\n\n")[-1]
    assert last.startswith("event: error\ndata: ")
    error = orjson.loads(last.split("data: ", 1)[1])["error"]
    assert error["code"] == "job_cancelled" and error["type"] == "conflict_error"


@pytest.fixture
async def production_server(settings: Settings) -> AsyncIterator[tuple[str, web.Application]]:
    """The app served as `chattts-online web` serves it (handlers not cancelled on disconnect)."""
    app = create_app(settings)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}", app
    await runner.cleanup()


@pytest.mark.parametrize("stream_format", [None, "audio", "sse"])
async def test_client_leaving_leaks_nothing(
    production_server: tuple[str, web.Application], stream_format: str | None
) -> None:
    """No worker: the job waits; the client gives up; the server stops following the job."""
    url, app = production_server
    hub = app[HUB]
    body = {"model": "tts-1", "voice": "alloy", "input": "Nobody will hear this."}
    if stream_format:
        body["stream_format"] = stream_format
    waiting = {"_terminal", "_Sender.run", "gone", "speech"}

    def handlers() -> list[asyncio.Task[Any]]:
        names = {t: getattr(t.get_coro(), "__qualname__", "") for t in asyncio.all_tasks()}
        return [t for t, name in names.items() if name in waiting]

    async with aiohttp.ClientSession() as session:
        request = asyncio.create_task(session.post(f"{url}/v1/audio/speech", json=body))
        async with asyncio.timeout(5):
            while hub.subscriber_count == 0:
                await asyncio.sleep(0.02)
        assert handlers()
        request.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await request
    async with asyncio.timeout(5):
        while hub.subscriber_count or handlers():
            await asyncio.sleep(0.05)


def test_voice_table() -> None:
    assert mostly_mandarin("你好，世界。") and not mostly_mandarin("Hello, world.")
    assert mostly_mandarin("我们用 ChatTTS 合成语音") and not mostly_mandarin(
        "Say 你好 to everyone"
    )
    assert resolve_voice("alloy", "Hello") == "en_female"
    assert resolve_voice("Alloy", "你好") == "zh_female"
    assert resolve_voice("onyx", "你好") == "zh_male_2"
    assert resolve_voice({"id": "zh_male"}, "Hello") == "zh_male"
    assert resolve_voice(None, "Hello") == "en_female"
    assert resolve_voice("my_voice", "Hello") == "my_voice"


async def test_job_status_of_a_speech_request(client: Client, worker: WorkerProcess) -> None:
    response = await oa(client).audio.speech.with_raw_response.create(
        model="chattts", voice="zh_male", input="你好", response_format="flac", speed=3.0
    )
    job = await wait_job(client, response.headers["x-job-id"], ("succeeded",))
    assert job["voice"] == "zh_male" and job["format"] == "flac"
    assert duration(response.content, "flac") > 0.1


@pytest.mark.parametrize(
    ("path", "extra"),
    [
        ("/v1/audio/speech", {"stream_format": "audio"}),
        ("/v1/audio/speech", {}),  # a whole answer waits as long: once it held no lease
        ("/dev/captioned_speech", {}),
    ],
)
async def test_answers_held_open_hold_a_stream_lease(
    make_client: ClientFactory, path: str, extra: dict[str, str]
) -> None:
    """Each answer held open while its job is made holds one of its address's leases, taken
    before its job is queued: past the cap, a 429 that queues nothing."""
    client = await make_client(streams_per_address=1)
    body = {"model": "tts-1", "input": "Held open.", "voice": "nova", **extra}
    held = asyncio.create_task(client.post(path, json=body))  # no worker: it waits
    await asyncio.sleep(0.5)
    before = (await (await client.get("/metrics")).text()).count("chattts_jobs_submitted_total 1")
    refused = await client.post(path, json=body)
    assert refused.status == 429 and refused.headers["Retry-After"], await refused.text()
    assert "connections waiting at once" in (await refused.json())["error"]["message"]
    after = (await (await client.get("/metrics")).text()).count("chattts_jobs_submitted_total 1")
    assert before == after == 1  # the refused one queued nothing
    held.cancel()


async def test_encoding_a_cached_answer_is_paced_per_address(
    make_client: ClientFactory, worker: WorkerProcess
) -> None:
    """A cached answer's PCM is all there at once; encoded to mp3 for a stream it is paced by the
    address's encode rate: the second answer takes its PCM, less a burst, at that rate."""
    rate = 256 * 1024
    client = await make_client(encode_rate_per_address_bytes=rate)
    body = {
        "model": "tts-1",
        "input": LONG,
        "voice": "nova",
        "response_format": "mp3",
        "stream_format": "audio",
    }
    first = await client.post("/v1/audio/speech", json=body)
    assert first.status == 200 and duration(await first.read(), "mp3") > 10.0
    job = await (await client.get(f"/v1/tts/jobs/{first.headers['X-Job-Id']}")).json()
    pcm_bytes = float(job["duration_s"]) * RATE * 2
    await asyncio.sleep(1.5)  # the burst is back
    started = asyncio.get_running_loop().time()
    again = await client.post("/v1/audio/speech", json=body)
    data = await again.read()
    took = asyncio.get_running_loop().time() - started
    cached = await (await client.get(f"/v1/tts/jobs/{again.headers['X-Job-Id']}")).json()
    assert cached["cached"] is True, cached
    assert abs(duration(data, "mp3") - float(job["duration_s"])) < 1.0
    assert took >= 0.9 * (pcm_bytes - rate) / rate, (took, pcm_bytes)


def _mp3_frames_only(data: bytes) -> None:
    """Bare MPEG audio frames: no ID3 tag, no Xing/Info frame (what joins by concatenation)."""
    assert data[:2] == b"\xff\xf3" or data[:2] == b"\xff\xfb", data[:4]
    assert b"ID3" not in data[:10] and b"Xing" not in data and b"Info" not in data[:2000]


async def test_mp3_answers_join_as_one_file(client: Client, worker: WorkerProcess) -> None:
    """Home Assistant joins the mp3 answers of a long text's pieces into one file."""
    pieces = []
    for text, stream in (("The first piece.", None), ("And the second one.", "audio")):
        body = {"model": "tts-1", "voice": "alloy", "input": text}
        if stream:
            body["stream_format"] = stream
        response = await client.post("/v1/audio/speech", json=body)
        assert response.status == 200, await response.text()
        pieces.append(await response.read())
    for piece in pieces:
        _mp3_frames_only(piece)
    joined = duration(pieces[0] + pieces[1], "mp3")
    assert joined == pytest.approx(duration(pieces[0], "mp3") + duration(pieces[1], "mp3"), abs=0.1)


async def test_open_webuis_body_and_sillytaverns_empty_bearer(
    client: Client, worker: WorkerProcess
) -> None:
    """Open WebUI sends no response_format (mp3 comes back); SillyTavern sends `Bearer ` empty."""
    body = {"model": "tts-1", "voice": "alloy", "input": "Hello there."}
    for headers in ({}, {"Authorization": "Bearer "}):
        response = await client.post("/v1/audio/speech", json=body, headers=headers)
        assert response.status == 200, await response.text()
        assert response.headers["Content-Type"] == "audio/mpeg"
        _mp3_frames_only(await response.read())


async def test_kokoro_clients_fields(client: Client, worker: WorkerProcess) -> None:
    """What Kokoro-FastAPI's clients send beside OpenAI's fields, and its voice names."""
    base = {"model": "kokoro", "voice": "af_bella", "input": "Hello from Kokoro's client."}
    plain = await client.post("/v1/audio/speech", json={**base, "response_format": "pcm"})
    assert plain.status == 200, await plain.text()
    pcm = np.frombuffer(await plain.read(), "<i2").astype(np.float32)
    louder = await client.post(
        "/v1/audio/speech",
        json={
            **base,
            "response_format": "pcm",
            "stream": True,
            "lang_code": "a",
            "volume_multiplier": 2.0,
            "normalization_options": {"normalize": True, "unit_normalization": False},
        },
    )
    assert louder.status == 200, await louder.text()
    assert louder.headers.get("Transfer-Encoding") == "chunked"  # stream: true
    scaled = np.frombuffer(await louder.read(), "<i2").astype(np.float32)
    assert scaled.size == pcm.size
    loud = np.abs(pcm) < 16_000  # where doubling does not clip
    assert np.allclose(scaled[loud], 2 * pcm[loud], atol=2)
    linked = await client.post(
        "/v1/audio/speech", json={**base, "stream": True, "return_download_link": True}
    )
    assert linked.status == 200
    path = linked.headers["X-Download-Path"]
    assert path == f"/v1/tts/jobs/{linked.headers['X-Job-Id']}/audio"
    kept = await (await client.get(path)).read()  # the same audio, with its Xing frame
    assert bare_mp3(kept) == await linked.read() and kept[:4] != (await linked.read())[:4]
    for field, value in (("volume_multiplier", 0), ("normalization_options", {"nope": True})):
        refused = await client.post("/v1/audio/speech", json={**base, field: value})
        assert refused.status == 400
        assert (await refused.json())["error"]["param"] == field


async def test_a_blend_needs_an_engine_that_mixes(client: Client, worker: WorkerProcess) -> None:
    body = {"model": "tts-1", "voice": "af_bella(2)+af_sky(1)", "input": "Hello."}
    refused = await client.post("/v1/audio/speech", json=body)
    assert refused.status == 400
    error = (await refused.json())["error"]
    assert (
        error["code"] == "voice_blend_unsupported"
        and "en_female(2)+en_female(1)" in error["message"]
    )
    bad = await client.post("/v1/audio/speech", json={**body, "voice": "alloy+mine"})
    assert bad.status == 400 and "neither" in (await bad.json())["error"]["message"]
    seeded = await client.post("/v1/audio/speech", json={**body, "voice": "2222"})
    assert seeded.status == 200  # a seed is a voice on every engine
