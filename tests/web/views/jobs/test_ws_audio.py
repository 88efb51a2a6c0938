"""WebSocket audio frames: each finished segment's audio right after its `progress` event."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import aiohttp
import soundfile as sf
from aiohttp.test_utils import TestClient

from tests.conftest import WorkerProcess

Client = TestClient[Any, Any]
TERMINAL = ("succeeded", "failed", "cancelled", "dead")
LONG = "This sentence is one of several that make a long text to speak. " * 6


async def _frames(ws: aiohttp.ClientWebSocketResponse, job_id: str) -> list[Any]:
    """Every frame of one job (JSON as dicts, binary as bytes) until its terminal event and
    the audio that may follow it."""
    out: list[Any] = []
    async with asyncio.timeout(20):
        while True:
            msg = await ws.receive()
            if msg.type == aiohttp.WSMsgType.BINARY:
                out.append(msg.data)
                continue
            frame = msg.json()
            out.append(frame)
            if frame.get("type") == "event" and frame["event"]["type"] in TERMINAL:
                break
        # The whole file follows `succeeded` when no segment was sent: wait for it briefly.
        try:
            async with asyncio.timeout(1.0):
                header = await ws.receive_json()
                out += [header, await ws.receive_bytes()]
        except TimeoutError:
            pass
    return out


def _check_pairs(frames: list[Any]) -> list[tuple[dict[str, Any], bytes]]:
    """Each binary frame directly follows its header, which announces its length."""
    pairs = []
    for i, frame in enumerate(frames):
        if isinstance(frame, bytes):
            header = frames[i - 1]
            assert header["type"] == "audio" and header["bytes"] == len(frame)
            pairs.append((header, frame))
        elif frame.get("type") == "audio":
            assert isinstance(frames[i + 1], bytes)
    return pairs


async def test_segments_arrive_after_their_progress(client: Client, worker: WorkerProcess) -> None:
    async with client.ws_connect("/v1/ws") as ws:
        await ws.send_json(
            {"op": "submit", "audio": True, "request": {"text": LONG, "voice": "en_male"}}
        )
        job = (await ws.receive_json())["job"]
        frames = await _frames(ws, job["id"])
        pairs = _check_pairs(frames)
        events = [f["event"] for f in frames if isinstance(f, dict) and f["type"] == "event"]
        progress = [e for e in events if e["type"] == "progress"]
        total = progress[0]["segment"]["total"]
        assert total > 1 and len(pairs) == total
        for header, data in pairs:
            position = frames.index(header)
            event = frames[position - 1]["event"]
            assert event["type"] == "progress" and event["segment"]["index"] == header["segment"]
            assert header["job_id"] == job["id"] and header["total"] == total
            assert header["format"] == "wav" and header["final"] is False
            samples, rate = sf.read(io.BytesIO(data))
            assert rate == 24_000 and len(samples) > 0

        # Subscribing again replays the events, and the audio with them.
        await ws.send_json({"op": "subscribe", "job_id": job["id"], "audio": True})
        again = _check_pairs(await _frames(ws, job["id"]))
        assert [data for _, data in again] == [data for _, data in pairs]


async def test_one_segment_job_gets_its_file_after_succeeded(
    client: Client, worker: WorkerProcess
) -> None:
    async with client.ws_connect("/v1/ws") as ws:
        request = {"text": "Short.", "voice": "en_female", "format": "mp3"}
        await ws.send_json({"op": "submit", "audio": True, "request": request})
        job = (await ws.receive_json())["job"]
        frames = await _frames(ws, job["id"])
        pairs = _check_pairs(frames)
        assert len(pairs) == 1
        header, data = pairs[0]
        assert frames[frames.index(header) - 1]["event"]["type"] == "succeeded"
        assert header["final"] is True and header["format"] == "mp3"
        assert data == await (await client.get(job["audio_url"])).read()

        # Without the option: events only.
        await ws.send_json({"op": "subscribe", "job_id": job["id"]})
        assert not _check_pairs(await _frames(ws, job["id"]))
        await ws.send_json({"op": "subscribe", "job_id": job["id"], "audio": "yes"})
        error = await ws.receive_json()
        assert error["type"] == "error" and error["error"]["param"] == "audio"


async def test_a_streaming_job_sends_its_chunks_that_join_into_its_samples(
    client: Client, worker: WorkerProcess
) -> None:
    """ "stream": true: each `audio` event frame is followed by its PCM chunk, never a segment
    file as well; the chunks are the job's samples (pcm: its very file)."""
    async with client.ws_connect("/v1/ws") as ws:
        request = {"text": LONG, "voice": "en_male", "format": "pcm", "stream": True}
        await ws.send_json({"op": "submit", "audio": True, "request": request})
        job = (await ws.receive_json())["job"]
        frames = await _frames(ws, job["id"])
        pairs = _check_pairs(frames)
        events = [f["event"] for f in frames if isinstance(f, dict) and f["type"] == "event"]
        chunks = [e for e in events if e["type"] == "audio"]
        assert len(chunks) > 1 and len(pairs) == len(chunks)
        assert [h["chunk"] for h, _ in pairs] == [e["chunk"]["index"] for e in chunks]
        assert all(h["format"] == "pcm" and h["final"] is False for h, _ in pairs)
        for header, _ in pairs:  # each chunk right after its own event
            event = frames[frames.index(header) - 1]["event"]
            assert event["type"] == "audio" and event["chunk"]["index"] == header["chunk"]
        final = await (await client.get(job["audio_url"])).read()
        assert b"".join(data for _, data in pairs) == final
