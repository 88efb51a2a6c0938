"""`/v1/live`: text in pieces, audio out in order with its alignment; flush, barge-in, several
contexts, idle contexts, limits and bad frames; a worker that dies mid-session."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from core.infra.settings import Settings
from tests.conftest import ClientFactory, WorkerProcess
from tests.web.views.jobs.test_restarts import CHUNK, FIRST, SECOND, HandWorker
from web.appkeys import MEMORY, QUEUE

Client = TestClient[Any, Any]
WS = aiohttp.ClientWebSocketResponse
ANSWER = (
    "Sure, here is the plan. First we meet at 10:30 at the station, then Dr. Smith shows us "
    "the lab. The budget is 1,000.50 dollars in all! Does that work for you?"
)


@dataclass
class Heard:
    """What a context sent back: its audio, segments and last frames."""

    audio: list[dict[str, Any]] = field(default_factory=list)
    pcm: bytearray = field(default_factory=bytearray)
    segments: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    frames: list[dict[str, Any]] = field(default_factory=list)


async def receive(
    ws: WS, heard: dict[str, Heard], until: str, context: str = "main", timeout: float = 30
) -> dict[str, Any]:
    """Frames until `until` arrives for `context`; an audio header's binary frame is read with
    it (it must come next, of exactly the bytes it says)."""
    async with asyncio.timeout(timeout):
        while True:
            frame = await ws.receive_json()
            mine = heard.setdefault(frame.get("context") or "", Heard())
            mine.frames.append(frame)
            if frame["type"] == "audio":
                data = await ws.receive_bytes()
                assert len(data) == frame["bytes"]
                mine.audio.append(frame)
                mine.pcm += data
            elif frame["type"] == "segment":
                mine.segments.append(frame)
            elif frame["type"] == "error":
                mine.errors.append(frame)
            if frame["type"] == until and frame.get("context") in (context, None):
                return frame


def tokens(text: str, rng: random.Random) -> list[str]:
    """The text as an LLM streams it: pieces of 1 to 6 characters."""
    out, at = [], 0
    while at < len(text):
        size = rng.randint(1, 6)
        out.append(text[at : at + size])
        at += size
    return out


def squeezed(text: str) -> str:
    return "".join(text.split())


async def test_tokens_in_audio_out_in_order(client: Client, worker: WorkerProcess) -> None:
    heard: dict[str, Heard] = {}
    async with client.ws_connect("/v1/live") as ws:
        await ws.send_json({"op": "open", "voice": "en_male", "seed": 7})
        opened = await receive(ws, heard, "opened")
        assert opened["voice"] == "en_male" and opened["sample_rate"] == 24000
        for piece in tokens(ANSWER, random.Random(1)):
            await ws.send_json({"op": "text", "text": piece})
        await ws.send_json({"op": "close"})
        done = await receive(ws, heard, "done")
    main = heard["main"]
    texts = [s["text"] for s in main.segments]
    assert len(texts) >= 3, texts
    assert squeezed("".join(texts)) == squeezed(ANSWER)  # every word once, in order
    assert any("1,000.50" in t for t in texts) and any("10:30" in t for t in texts)
    assert not any(t.rstrip().endswith("Dr.") for t in texts)
    assert [s["segment"] for s in main.segments] == list(range(1, len(texts) + 1))
    assert done["segments"] == len(texts)
    # The audio is continuous: each piece starts where the one before ended.
    at = 0.0
    for frame in main.audio:
        assert abs(frame["start_ms"] - at) < 1.0
        at += frame["duration_ms"]
    assert abs(done["audio_ms"] - at) < 1.0 and abs(len(main.pcm) / 48 - at) < 1.0
    # Every character of each segment is aligned once, in order, inside its segment's audio.
    for segment in main.segments:
        pieces = [f for f in main.audio if f["segment"] == segment["segment"]]
        chars = "".join(c for f in pieces for c in f["alignment"]["chars"])
        assert chars == segment["text"]
        starts = [s for f in pieces for s in f["alignment"]["char_start_ms"]]
        assert starts == sorted(starts)
        assert segment["start_ms"] - 1 <= starts[0] and starts[-1] <= segment["end_ms"] + 1
        assert [w["word"] for w in segment["words"]][:2] == segment["text"].split()[:2]
    # Each segment was a streamed job of the context's voice and seed.
    listed = await (await client.get("/v1/tts/jobs", params={"limit": "50"})).json()
    jobs = [await client.app[QUEUE].get(job["id"]) for job in listed["jobs"]]
    assert len(jobs) == len(texts)
    assert {(j.request.voice, j.request.seed, j.request.stream) for j in jobs if j} == {
        ("en_male", 7, True)
    }


async def test_flush_speaks_a_sentence_not_finished(client: Client, worker: WorkerProcess) -> None:
    heard: dict[str, Heard] = {}
    async with client.ws_connect("/v1/live") as ws:
        await ws.send_json({"op": "text", "text": "Hello there my friend"})
        await ws.send_json({"op": "flush"})
        segment = await receive(ws, heard, "segment")
        assert segment["text"] == "Hello there my friend"
        await ws.send_json({"op": "text", "text": " and goodbye", "flush": True})
        segment = await receive(ws, heard, "segment")
        assert segment["text"] == "and goodbye" and segment["segment"] == 2


async def test_barge_in_stops_the_audio_and_goes_on(client: Client, worker: WorkerProcess) -> None:
    heard: dict[str, Heard] = {}
    long_answer = " ".join(f"This is sentence number {n} of a long answer." for n in range(40))
    async with client.ws_connect("/v1/live") as ws:
        await ws.send_json({"op": "text", "text": long_answer})
        await receive(ws, heard, "audio")
        await ws.send_json({"op": "clear"})
        await receive(ws, heard, "cleared")
        before = len(heard["main"].segments)
        await ws.send_json({"op": "text", "text": "A new turn.", "flush": True})
        await ws.send_json({"op": "close"})
        await receive(ws, heard, "done")
    main = heard["main"]
    after = main.frames[[f["type"] for f in main.frames].index("cleared") + 1 :]
    spoken = [f["text"] for f in after if f["type"] == "segment"]
    assert spoken == ["A new turn."], spoken  # nothing of the old text after the clear
    assert before < 40
    await nothing_held(client)
    # The segment heard at the clear and the one queued ahead of it were cancelled or done:
    # nothing of the old text is left for a worker to make.
    async with asyncio.timeout(10):
        while True:
            listed = await client.get("/v1/tts/jobs", params={"state": "queued,running"})
            if not (await listed.json())["jobs"]:
                break
            await asyncio.sleep(0.1)


async def test_contexts_are_independent(client: Client, worker: WorkerProcess) -> None:
    heard: dict[str, Heard] = {}
    async with client.ws_connect("/v1/live") as ws:
        await ws.send_json({"op": "open", "context": "a", "voice": "en_female"})
        await ws.send_json({"op": "open", "context": "b", "voice": "zh_male"})
        for piece in tokens("One. Two. Three.", random.Random(2)):
            await ws.send_json({"op": "text", "context": "a", "text": piece})
            await ws.send_json({"op": "text", "context": "b", "text": piece})
        await ws.send_json({"op": "text", "context": "nope", "text": 5})  # a bad frame
        await ws.send_json({"op": "close", "context": "a"})
        await ws.send_json({"op": "close", "context": "b"})
        await receive(ws, heard, "done", "a")
        if not any(f["type"] == "done" for f in heard.get("b", Heard()).frames):
            await receive(ws, heard, "done", "b")
    for name in ("a", "b"):
        texts = [s["text"] for s in heard[name].segments]
        assert squeezed("".join(texts)).startswith("One.Two.Three."), (name, texts)
    assert heard["nope"].errors[0]["error"]["code"] == "invalid_text"


async def test_idle_context_is_closed(make_client: ClientFactory, worker: WorkerProcess) -> None:
    client = await make_client(live_idle_s=1.0)
    heard: dict[str, Heard] = {}
    async with client.ws_connect("/v1/live") as ws:
        await ws.send_json({"op": "text", "context": "x", "text": "Hi.", "flush": True})
        error = await receive(ws, heard, "error", "x", timeout=10)
        assert error["error"]["code"] == "context_idle"
        await ws.send_json({"op": "flush", "context": "x"})
        error = await receive(ws, heard, "error", "x")
        assert error["error"]["code"] == "no_such_context"


async def test_limits_and_bad_frames(make_client: ClientFactory) -> None:
    client = await make_client(
        live_message_chars=20, live_contexts=2, live_pending_chars=60, live_sessions_per_client=1
    )
    heard: dict[str, Heard] = {}
    async with client.ws_connect("/v1/live") as ws:
        await ws.send_str("{not json")
        assert (await receive(ws, heard, "error", ""))["error"]["code"] == "invalid_json"
        await ws.send_json({"op": "text", "context": "a", "text": "x" * 21})
        assert (await receive(ws, heard, "error", "a"))["error"]["code"] == "message_too_long"
        for _ in range(3):  # no worker: the text waits, up to what a context may hold
            await ws.send_json({"op": "text", "context": "a", "text": "no worker hears "})
        await ws.send_json({"op": "text", "context": "a", "text": "this at all, no"})
        error = await receive(ws, heard, "error", "a")
        assert error["error"]["code"] == "text_ahead_of_speech"
        await ws.send_json({"op": "open", "context": "b"})
        await ws.send_json({"op": "open", "context": "c"})
        assert (await receive(ws, heard, "error", "c"))["error"]["code"] == "too_many_contexts"
        await ws.send_json({"op": "open", "context": "d", "voice": "nobody"})
        assert (await receive(ws, heard, "error", "d"))["error"]["code"] == "unknown_voice"
        await ws.send_json({"op": "dance"})
        assert (await receive(ws, heard, "error", "main"))["error"]["code"] == "unknown_op"
        # A second live connection of the same client is refused before the upgrade.
        second = await client.get("/v1/live", headers={"Upgrade": "websocket"})
        assert second.status == 429
        await ws.send_json({"op": "ping", "ref": 1})
        assert (await receive(ws, heard, "pong", ""))["ref"] == 1  # the socket still works
        assert client.app[MEMORY].held > 0  # the text waiting counts in the memory budget
    await nothing_held(client)


async def nothing_held(client: Client) -> None:
    """Once a connection is gone, nothing of it is counted in the memory budget."""
    try:
        async with asyncio.timeout(5):
            while client.app[MEMORY].held:
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"still held: {client.app[MEMORY].held}") from None


async def test_a_worker_killed_mid_session(client: Client, start_worker: Any) -> None:
    first = start_worker("w1")
    heard: dict[str, Heard] = {}
    sentences = [f"Sentence {word} is here." for word in ("one", "two", "three", "four")]
    async with client.ws_connect("/v1/live") as ws:
        await ws.send_json({"op": "text", "text": sentences[0] + " "})
        await ws.send_json({"op": "text", "text": sentences[1] + " ", "flush": True})
        await receive(ws, heard, "segment")
        first.kill()  # SIGKILL: whatever it held is reclaimed by the next worker
        for sentence in sentences[2:]:
            await ws.send_json({"op": "text", "text": sentence + " "})
        await ws.send_json({"op": "close"})
        start_worker("w2")
        await receive(ws, heard, "done", timeout=60)
    texts = [s["text"] for s in heard["main"].segments]
    assert squeezed("".join(texts)) == squeezed(" ".join(sentences)), texts


async def test_a_segment_restarted_goes_on_where_it_stopped(
    client: Client, aredis: Redis, settings: Settings
) -> None:
    """A segment whose worker died after two chunks is made again by the next one: the
    listener hears the first run's two chunks, then the new run's from its third on."""
    hand = HandWorker(aredis, settings)
    heard: dict[str, Heard] = {}
    async with client.ws_connect("/v1/live") as ws:
        await ws.send_json({"op": "text", "text": "Said in two attempts.", "flush": True})
        await ws.send_json({"op": "close"})
        async with asyncio.timeout(10):
            while not (listed := (await (await client.get("/v1/tts/jobs")).json())["jobs"]):
                await asyncio.sleep(0.05)
        job_id = listed[0]["id"]
        started = await hand.take(job_id)
        await hand.chunks(job_id, started, FIRST, 2)
        async with asyncio.timeout(10):
            while len(heard.get("main", Heard()).pcm) < 2 * CHUNK:
                await receive(ws, heard, "audio")
        again = await hand.restart(job_id, started)
        await hand.chunks(job_id, again, SECOND, 4)
        await hand.finish(job_id, again, 4)
        await receive(ws, heard, "done")
    assert bytes(heard["main"].pcm) == FIRST * 2 + SECOND * 2  # nothing twice, nothing lost


async def test_a_client_that_stops_reading_is_closed(
    make_client: ClientFactory, worker: WorkerProcess
) -> None:
    client = await make_client(connection_queue_size=4)
    long_answer = " ".join(f"This is sentence number {n} of a long answer." for n in range(60))
    ws = await client.ws_connect("/v1/live")
    try:
        await ws.send_json({"op": "text", "text": long_answer, "flush": True})
        await asyncio.sleep(6)  # reads nothing: the frames pile up, then the server gives up
        async with asyncio.timeout(20):
            while (await ws.receive()).type not in (
                aiohttp.WSMsgType.CLOSE,
                aiohttp.WSMsgType.CLOSED,
            ):
                pass
        # 1013 when the close frame gets through the full pipe, else the connection is cut.
        assert ws.close_code in (1013, 1006)
    finally:  # the server may have cut it already: nothing to say on closing
        with contextlib.suppress(aiohttp.ClientConnectionResetError):
            await ws.close()
    await nothing_held(client)


async def test_a_sentence_is_spoken_when_the_text_pauses_after_it(
    client: Client, worker: WorkerProcess
) -> None:
    """ "It costs 3." may go on ("3.5"), so it waits for what follows; when nothing follows for
    a moment, it is spoken. A sentence not finished is not."""
    heard: dict[str, Heard] = {}
    async with client.ws_connect("/v1/live") as ws:
        await ws.send_json({"op": "text", "text": "It costs 3. "})
        segment = await receive(ws, heard, "segment", timeout=5)
        assert segment["text"] == "It costs 3."
        await ws.send_json({"op": "text", "text": "And then we wait"})
        await asyncio.sleep(1.0)
        assert len(heard["main"].segments) == 1
        await ws.send_json({"op": "close"})
        await receive(ws, heard, "done")
    assert [s["text"] for s in heard["main"].segments] == ["It costs 3.", "And then we wait"]


async def test_segments_are_submissions_that_wait_their_turn(
    make_client: ClientFactory, worker: WorkerProcess
) -> None:
    """Each segment is charged to the client's submission rate: past it, it waits (nothing is
    refused mid-answer), so that many contexts cannot submit faster than any client may."""
    client = await make_client(submit_rate_per_client=2.0, submit_burst_per_client=1)
    heard: dict[str, Heard] = {}
    started = time.monotonic()
    async with client.ws_connect("/v1/live") as ws:
        await ws.send_json({"op": "text", "text": "One is here. Two is here. Three is here."})
        await ws.send_json({"op": "close"})
        await receive(ws, heard, "done")
    assert [s["text"] for s in heard["main"].segments] == [
        "One is here.",
        "Two is here.",
        "Three is here.",
    ]
    assert not heard["main"].errors
    # The connection's own submission, then three segments at two a second, one at a time.
    assert time.monotonic() - started >= 1.0


async def test_the_next_segment_is_queued_ahead_and_a_clear_cancels_it(
    client: Client, aredis: Redis, settings: Settings
) -> None:
    """While one segment is heard the next one's job waits in the queue already (so that it is
    made before the joint); a barge-in cancels both."""
    hand = HandWorker(aredis, settings)
    heard: dict[str, Heard] = {}
    async with client.ws_connect("/v1/live") as ws:
        await ws.send_json({"op": "text", "text": "The first one. The second one. The third."})
        async with asyncio.timeout(10):
            while not (listed := (await (await client.get("/v1/tts/jobs")).json())["jobs"]):
                await asyncio.sleep(0.05)
        first = listed[-1]["id"]  # the oldest: the list is newest first
        started = await hand.take(first)
        await hand.chunks(first, started, FIRST, 1)
        await receive(ws, heard, "audio")
        async with asyncio.timeout(10):  # the second segment is queued while the first plays
            while len(jobs := (await (await client.get("/v1/tts/jobs")).json())["jobs"]) < 2:
                await asyncio.sleep(0.05)
        assert len(jobs) == 2  # one ahead, no more
        await ws.send_json({"op": "clear"})
        await receive(ws, heard, "cleared")
        states = {job["id"]: (await client.get(f"/v1/tts/jobs/{job['id']}")).status for job in jobs}
        assert set(states.values()) == {200}
        second = next(job["id"] for job in jobs if job["id"] != first)
        assert (await (await client.get(f"/v1/tts/jobs/{second}")).json())["state"] == "cancelled"
        first_state = await (await client.get(f"/v1/tts/jobs/{first}")).json()
        assert first_state["state"] in ("cancelled", "running") and (
            first_state["state"] == "cancelled" or first_state.get("cancel_requested")
        )


async def test_each_segment_is_heard_and_its_verdict_told(
    client: Client, start_worker: Callable[..., WorkerProcess]
) -> None:
    """A segment whose first attempt runs on (as its check hears it) is made again; the `check`
    frame tells it after the segment, and `done` comes after every verdict."""
    start_worker(CHATTTS_FAULT_AUDIO="runon")
    text = "The quick brown fox jumps over the lazy dog near the river bank."
    for policy in ("send", "hold"):
        heard: dict[str, Heard] = {}
        async with client.ws_connect("/v1/live") as ws:
            await ws.send_json({"op": "open", "voice": "en_female", "stream_check": policy})
            await receive(ws, heard, "opened")
            await ws.send_json({"op": "text", "text": text})
            await ws.send_json({"op": "close"})
            await receive(ws, heard, "done")
        main = heard["main"]
        checks = [f for f in main.frames if f["type"] == "check"]
        assert [c["segment"] for c in checks] == [1]
        assert [(c["verdict"], c["attempts"]) for c in checks[0]["checks"]] == [("passed", 2)]
        assert main.frames[-1]["type"] == "done"
        kinds = [f["type"] for f in main.frames]
        # "send": the segment's audio and its `segment` frame before its verdict; "hold": the
        # same order, the audio only once its job had heard it.
        assert kinds.index("segment") < kinds.index("check")
        assert 1 < len(main.pcm) / 48_000 < 8


async def test_a_seed_is_a_voice_here_too(client: Client, worker: WorkerProcess) -> None:
    """A ChatTTS seed as users share it (`2222`), as a live context's voice: its jobs keep it as
    `seed_2222`, as every other API does."""
    heard: dict[str, Heard] = {}
    async with client.ws_connect("/v1/live") as ws:
        await ws.send_json({"op": "open", "voice": "2222"})
        await receive(ws, heard, "opened")
        await ws.send_json({"op": "text", "text": "Hello there.", "flush": True})
        await ws.send_json({"op": "close"})
        await receive(ws, heard, "done")
    assert heard["main"].pcm
    submitted = await client.post("/v1/tts/jobs", json={"text": "Hi.", "voice": "2222"})
    assert submitted.status == 202
    listed = await (await client.get("/v1/tts/jobs", params={"limit": "50"})).json()
    jobs = [await client.app[QUEUE].get(job["id"]) for job in listed["jobs"]]
    assert {j.request.voice for j in jobs if j} == {"seed_2222"}


async def test_a_flood_of_bad_frames_is_read_at_a_rate_and_told_once_a_second(
    client: Client,
) -> None:
    """Thousands of bad frames: a few errors at once, then one a second (not one error frame
    per bad frame), the socket read at its frame rate, and the process free for others."""
    flood = 3_000
    async with client.ws_connect("/v1/live") as ws:
        for _ in range(flood):
            await ws.send_str("{not json")
        errors, started = 0, time.monotonic()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(4.0):
                while True:
                    frame = await ws.receive_json()
                    errors += frame.get("type") == "error"
        elapsed = time.monotonic() - started
        assert 1 <= errors <= 10 + elapsed + 1, errors
        health_started = time.monotonic()
        assert (await client.get("/healthz")).status == 200
        assert time.monotonic() - health_started < 0.5
        # Still a working session: its next good frame is answered.
        await ws.send_json({"op": "ping", "ref": 7})
        async with asyncio.timeout(15):
            while (frame := await ws.receive_json()).get("type") != "pong":
                pass
        assert frame["ref"] == 7
