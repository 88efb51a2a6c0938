"""`/v1/audio/speech/stream` (vLLM-Omni's shape): sentences framed by audio.start and audio.done,
utterances ended by input.done, text for the next one held while the last one ends."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
from aiohttp.test_utils import TestClient

from tests.conftest import WorkerProcess

Client = TestClient[Any, Any]


async def utterance(ws: aiohttp.ClientWebSocketResponse) -> list[dict[str, Any]]:
    """Frames until a session.done; each binary frame as {"type": "pcm", "bytes": n}."""
    frames: list[dict[str, Any]] = []
    async with asyncio.timeout(30):
        while True:
            msg = await ws.receive()
            if msg.type == aiohttp.WSMsgType.BINARY:
                frames.append({"type": "pcm", "bytes": len(msg.data)})
                continue
            frame = msg.json()
            frames.append(frame)
            if frame["type"] == "session.done":
                return frames


async def test_sentences_and_utterances(client: Client, worker: WorkerProcess) -> None:
    async with client.ws_connect("/v1/audio/speech/stream") as ws:
        await ws.send_json({"type": "session.config", "voice": "en_female", "stream_audio": True})
        for piece in ("The first", " sentence. The", " second one", " ends here."):
            await ws.send_json({"type": "input.text", "text": piece})
        await ws.send_json({"type": "input.done"})
        await ws.send_json({"type": "input.text", "text": "A second turn."})  # held meanwhile
        first = await utterance(ws)
        await ws.send_json({"type": "input.done"})
        second = await utterance(ws)
        await ws.send_json({"type": "dance"})
        error = await ws.receive_json(timeout=10)
        assert error["type"] == "error" and error["code"] == "unknown_type"
        await ws.send_json({"type": "session.close"})
        assert (await ws.receive(timeout=10)).type == aiohttp.WSMsgType.CLOSE

    starts = [f for f in first if f["type"] == "audio.start"]
    assert [s["sentence_text"] for s in starts] == ["The first sentence.", "The second one ends here."]
    assert [s["sentence_index"] for s in starts] == [0, 1]
    assert {s["utterance_index"] for s in starts} == {0}
    # Each sentence's PCM lies between its start and its done, and adds up to what done says.
    kinds = [f["type"] for f in first]
    for start in starts:
        at = first.index(start)
        done = next(f for f in first[at:] if f["type"] == "audio.done")
        pcm = first[at + 1 : first.index(done)]
        assert pcm and {f["type"] for f in pcm} == {"pcm"}
        assert sum(f["bytes"] for f in pcm) == done["total_bytes"] > 0
    assert kinds[-1] == "session.done" and first[-1]["total_sentences"] == 2
    assert second[-1] == {"type": "session.done", "total_sentences": 1, "utterance_index": 1}
