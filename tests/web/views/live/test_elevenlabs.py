"""ElevenLabs' text-in WebSockets, frame by frame: contexts, flush, close_context and isFinal,
close_socket, keep-alives, errors, output formats (decoded), idle contexts and xi-api-key."""

from __future__ import annotations

import asyncio
import base64
import io
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import av
import pytest
from aiohttp.test_utils import TestClient

from tests.conftest import ClientFactory, WorkerProcess
from web.appkeys import QUEUE

Client = TestClient[Any, Any]
WS = aiohttp.ClientWebSocketResponse
MULTI = "/v1/text-to-speech/{voice}/multi-stream-input"
SINGLE = "/v1/text-to-speech/{voice}/stream-input"
# What ElevenLabs' voice ids look like: not ours, read with our default voice.
THEIR_VOICE = "21m00Tcm4TlvDq8ikWAM"


@dataclass
class Heard:
    """One context's frames: its audio bytes (decoded from base64), alignments, the rest."""

    audio: bytearray = field(default_factory=bytearray)
    alignments: list[dict[str, Any]] = field(default_factory=list)
    frames: list[dict[str, Any]] = field(default_factory=list)

    @property
    def final(self) -> bool:
        return any(f.get("isFinal") for f in self.frames)

    def text(self) -> str:
        return "".join(c for a in self.alignments for c in a["chars"])

    def end_ms(self) -> float:
        """Where the last character ends, times from the context's start (sync_alignment)."""
        last = self.alignments[-1]
        return float(last["charStartTimesMs"][-1] + last["charDurationsMs"][-1])

    def chunk_clock_ms(self) -> float:
        """The clock of a client that adds up each message's span (Pipecat)."""
        return float(
            sum(a["charStartTimesMs"][-1] + a["charDurationsMs"][-1] for a in self.alignments)
        )


async def receive(
    ws: WS, heard: dict[str, Heard], until: str, context: str = "", timeout: float = 30
) -> dict[str, Any]:
    """Frames until one with `until` (isFinal, error, audio) arrives for `context`."""
    async with asyncio.timeout(timeout):
        while True:
            frame = await ws.receive_json()
            mine = heard.setdefault(frame.get("contextId", ""), Heard())
            mine.frames.append(frame)
            if frame.get("audio") is not None:
                mine.audio += base64.b64decode(frame["audio"])
                assert frame["alignment"] == frame["normalizedAlignment"]
                if frame["alignment"] is not None:
                    alignment = frame["alignment"]
                    assert len(alignment["chars"]) == len(alignment["charStartTimesMs"])
                    assert len(alignment["chars"]) == len(alignment["charDurationsMs"])
                    mine.alignments.append(alignment)
            if frame.get(until) and frame.get("contextId", "") == context:
                return frame


def url(path: str, voice: str = "en_male", **query: str) -> str:
    return path.format(voice=voice) + ("?" + "&".join(f"{k}={v}" for k, v in query.items()))


def decoded(data: bytes, fmt: str) -> tuple[int, int]:
    """(sample rate, samples) of an encoded stream, read with FFmpeg."""
    with av.open(io.BytesIO(data), format=fmt) as container:
        frames = list(container.decode(audio=0))
    return frames[0].sample_rate, sum(f.samples for f in frames)


def squeezed(text: str) -> str:
    return "".join(text.split())


async def test_contexts_flush_and_close(client: Client, worker: WorkerProcess) -> None:
    """Two contexts interleaved on one socket (LiveKit's frames): flush speaks and ends
    nothing, close_context ends one with isFinal, the other goes on; pcm_16000."""
    heard: dict[str, Heard] = {}
    query = {"model_id": "eleven_flash_v2_5", "output_format": "pcm_16000", "auto_mode": "true"}
    async with client.ws_connect(
        url(MULTI, **query, sync_alignment="true"), headers={"xi-api-key": "anything"}
    ) as ws:
        for ctx in ("a", "b"):
            await ws.send_json({"text": " ", "voice_settings": {}, "context_id": ctx})
        await ws.send_json(
            {"text": "Hello there, this is a test. ", "context_id": "a", "flush": True}
        )
        await ws.send_json({"text": "One for b. ", "context_id": "b", "flush": True})
        await ws.send_json({"text": "", "context_id": "b"})  # a keep-alive
        await ws.send_json({"text": "Second sentence here. ", "context_id": "a", "flush": True})
        await ws.send_json({"text": "", "context_id": "a", "flush": True})
        await receive(ws, heard, "audio", "b")
        await ws.send_json({"context_id": "a", "close_context": True})
        await receive(ws, heard, "isFinal", "a")
        assert not heard.get("b", Heard()).final  # flushed, keep-alive: still open
        await ws.send_json({"text": "And more for b.", "context_id": "b"})
        await ws.send_json({"context_id": "b", "flush": True})
        await ws.send_json({"context_id": "b", "close_context": True})
        await receive(ws, heard, "isFinal", "b")
        await ws.send_json({"context_id": "never-opened", "close_context": True})
        await receive(ws, heard, "isFinal", "never-opened")  # nothing to say: final at once
    a, b = heard["a"], heard["b"]
    assert squeezed(a.text()) == "Hellothere,thisisatest.Secondsentencehere."
    assert squeezed(b.text()) == "Oneforb.Andmoreforb."
    assert a.frames[-1] == {"isFinal": True, "contextId": "a"}
    assert sum(1 for f in a.frames if f.get("isFinal")) == 1
    for context in (a, b):
        assert context.audio and len(context.audio) % 2 == 0
        # 16 kHz, 16-bit: its length is the audio the alignment spans (the context's clock).
        assert abs(len(context.audio) / 32 - context.end_ms()) < 5
        starts = [s for al in context.alignments for s in al["charStartTimesMs"]]
        assert starts == sorted(starts)
    listed = await (await client.get("/v1/tts/jobs", params={"limit": "50"})).json()
    jobs = [await client.app[QUEUE].get(job["id"]) for job in listed["jobs"]]
    assert {(j.request.voice, j.request.stream) for j in jobs if j} == {("en_male", True)}
    assert len({j.request.seed for j in jobs if j}) == 1  # one voice id, one seed


async def test_stream_input_mp3(client: Client, worker: WorkerProcess) -> None:
    """The single-context endpoint: no context ids, "" ends the input, then isFinal and the
    server closes; mp3_22050_32 decodes to 22.05 kHz audio as long as the alignment says."""
    heard: dict[str, Heard] = {}
    async with client.ws_connect(
        url(SINGLE, THEIR_VOICE, output_format="mp3_22050_32", sync_alignment="true")
    ) as ws:
        await ws.send_json({"text": " ", "voice_settings": {"stability": 0.5, "speed": 1.1}})
        await ws.send_json({"text": "Hello world, how are you today? "})
        await ws.send_json({"text": "I am fine."})
        await ws.send_json({"text": ""})
        await receive(ws, heard, "isFinal")
        closing = await ws.receive()
        assert closing.type == aiohttp.WSMsgType.CLOSE and closing.data == 1000
    main = heard[""]
    assert all("contextId" not in f for f in main.frames)
    assert squeezed(main.text()) == "Helloworld,howareyoutoday?Iamfine."
    rate, samples = decoded(bytes(main.audio), "mp3")
    assert rate == 22050
    # MP3 adds an encoder delay and pads its last frame (1152 samples).
    assert abs(samples / 22.05 - main.end_ms()) < 120
    listed = await (await client.get("/v1/tts/jobs", params={"limit": "50"})).json()
    jobs = [await client.app[QUEUE].get(job["id"]) for job in listed["jobs"]]
    assert jobs and all(j and j.request.voice != THEIR_VOICE for j in jobs)  # our default voice
    assert {j.request.speed for j in jobs if j} == {1.1}


@pytest.mark.parametrize(
    ("fmt", "container", "rate"),
    [("ulaw_8000", "mulaw", 8000), ("opus_48000_64", "ogg", 48000), ("pcm_44100", "s16le", 44100)],
)
async def test_other_formats(
    client: Client, worker: WorkerProcess, fmt: str, container: str, rate: int
) -> None:
    heard: dict[str, Heard] = {}
    async with client.ws_connect(url(MULTI, output_format=fmt, sync_alignment="true")) as ws:
        await ws.send_json({"text": "Testing one two three.", "context_id": "x", "flush": True})
        await ws.send_json({"context_id": "x", "close_context": True})
        await receive(ws, heard, "isFinal", "x")
    x = heard["x"]
    if container == "ogg":
        got, samples = decoded(bytes(x.audio), "ogg")
        assert got == rate
    else:
        samples = len(x.audio) // (1 if container == "mulaw" else 2)
    assert abs(samples / (rate / 1000) - x.end_ms()) < 30


async def test_chunk_relative_alignment(client: Client, worker: WorkerProcess) -> None:
    """Without sync_alignment, each message's times start at the end of the last character
    before (as Pipecat counts): its spans add up to the audio's length."""
    heard: dict[str, Heard] = {}
    text = "The first sentence is here. And here is the second one, a bit longer. "
    async with client.ws_connect(url(MULTI, output_format="pcm_24000", auto_mode="false")) as ws:
        await ws.send_json({"text": text, "context_id": "c"})
        await ws.send_json({"context_id": "c", "flush": True})
        await ws.send_json({"context_id": "c", "close_context": True})
        await receive(ws, heard, "isFinal", "c")
    c = heard["c"]
    assert len(c.alignments) > 2 and squeezed(c.text()) == squeezed(text)
    assert all(a["charStartTimesMs"][0] >= 0 for a in c.alignments)
    assert abs(c.chunk_clock_ms() - len(c.audio) / 48) < 2


async def test_refusals_and_bad_frames(client: Client, worker: WorkerProcess) -> None:
    heard: dict[str, Heard] = {}
    for query, code in (
        ({"output_format": "pcm_11025"}, "unsupported_format"),
        ({"model_id": "eleven_v3"}, "unsupported_model"),
        ({"inactivity_timeout": "soon"}, "invalid_inactivity_timeout"),
    ):
        async with client.ws_connect(url(MULTI, **query)) as ws:
            error = await ws.receive_json()
            assert error["error"] == code and "contextId" not in error, error
            assert "is not served here" in error["message"] or code != "unsupported_format"
            closing = await ws.receive()
            assert closing.type == aiohttp.WSMsgType.CLOSE and closing.data == 1008
    async with client.ws_connect(url(MULTI, output_format="pcm_16000")) as ws:
        await ws.send_str("{not json")
        assert (await receive(ws, heard, "error"))["error"] == "invalid_json"
        await ws.send_json({"text": 5, "context_id": "q"})
        assert (await receive(ws, heard, "error", "q"))["error"] == "invalid_text"
        await ws.send_bytes(b"\x00")
        assert (await receive(ws, heard, "error"))["error"] == "binary_not_accepted"
        await ws.send_json({"text": ""})  # Pipecat's keep-alive with no context: nothing
        await ws.send_json({"text": "Still here.", "context_id": "q", "flush": True})
        await receive(ws, heard, "audio", "q")
        await ws.send_json({"close_socket": True})
        closing = await ws.receive()
        while closing.type == aiohttp.WSMsgType.TEXT:  # what was queued before it
            closing = await ws.receive()
        assert closing.type == aiohttp.WSMsgType.CLOSE and closing.data == 1000
    assert not heard["q"].final  # close_socket ends contexts without isFinal


async def test_idle_context_reopens(make_client: ClientFactory, worker: WorkerProcess) -> None:
    """inactivity_timeout sets a context's idle time; an idle context is closed (said without
    its id: a plugin would fail its turn) and text to it opens it again."""
    client = await make_client(live_idle_s=60.0)
    heard: dict[str, Heard] = {}
    async with client.ws_connect(url(MULTI, inactivity_timeout="1")) as ws:
        await ws.send_json({"text": "Hi there.", "context_id": "z", "flush": True})
        error = await receive(ws, heard, "error", timeout=10)
        assert error["error"] == "context_idle" and "'z'" in error["message"]
        await ws.send_json({"text": "Again.", "context_id": "z", "flush": True})
        await ws.send_json({"context_id": "z", "close_context": True})
        await receive(ws, heard, "isFinal", "z")
    assert squeezed(heard["z"].text()) == "Hithere.Again."


async def test_xi_api_key_is_the_key(make_client: ClientFactory) -> None:
    """With API keys configured, ElevenLabs' key header counts as a Bearer key would, on every
    route."""
    client = await make_client(api_keys="k-eleven")
    path = url(MULTI, output_format="pcm_16000")
    for headers in ({}, {"xi-api-key": "wrong"}):
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await client.ws_connect(path, headers=headers)
        assert refused.value.status == 401
    for headers in ({"xi-api-key": "k-eleven"}, {"Authorization": "Bearer k-eleven"}):
        async with client.ws_connect(path, headers=headers) as ws:
            await ws.send_json({"text": "", "context_id": "k"})
            await ws.send_json({"context_id": "k", "close_context": True})
            assert await ws.receive_json() == {"isFinal": True, "contextId": "k"}
    # Elsewhere too (LiveKit's plugin lists the voices with it), and a wrong one is refused.
    answer = await client.get("/v1/voices", headers={"xi-api-key": "k-eleven"})
    assert answer.status == 200
    answer = await client.get("/v1/voices", headers={"xi-api-key": "wrong"})
    assert answer.status == 401


async def test_a_close_after_unflushed_text_interrupts_the_context(
    client: Client, worker: WorkerProcess
) -> None:
    """Pipecat's barge-in: a turn's text without a flush, then close_context. Its device work
    stops within a segment (the jobs not yet made are never made), nothing of it comes after
    isFinal, and the next turn on the socket speaks at once. A turn flushed, then closed, is
    spoken to its end (test_contexts_flush_and_close)."""
    heard: dict[str, Heard] = {}
    answer = [f"This is sentence number {n} of a long answer. " for n in range(30)]
    async with client.ws_connect(url(MULTI, auto_mode="true")) as ws:
        await ws.send_json({"text": " ", "context_id": "turn-1"})
        for sentence in answer:
            await ws.send_json({"text": sentence, "context_id": "turn-1"})
        await receive(ws, heard, "audio", "turn-1")
        await ws.send_json({"context_id": "turn-1", "close_context": True})
        await receive(ws, heard, "isFinal", "turn-1")
        await ws.send_json({"text": "The next turn.", "context_id": "turn-2", "flush": True})
        await ws.send_json({"context_id": "turn-2", "close_context": True})
        await receive(ws, heard, "isFinal", "turn-2")
    interrupted = heard["turn-1"]
    assert interrupted.frames[-1] == {"isFinal": True, "contextId": "turn-1"}
    assert squeezed(heard["turn-2"].text()) == "Thenextturn."
    await asyncio.sleep(1)  # what the worker was making when the close came
    listed = await (await client.get("/v1/tts/jobs", params={"limit": 100})).json()
    states = [job["state"] for job in listed["jobs"]]
    made = states.count("succeeded") - 1  # turn-2's one
    assert made <= 3 and len(states) - 1 < len(answer) // 2, states
    assert squeezed(interrupted.text()) in squeezed("".join(answer))
