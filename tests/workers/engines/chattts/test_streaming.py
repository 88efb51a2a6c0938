"""Streaming through the whole service on the decode runtime: continuous batching as a client
sees it (a job arriving mid-run streams before the running one ends), and OpenAI streamed speech
in chunks, against the service of service.py (a real chattts worker on the tiny checkpoint)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.web.conftest import sse_events, submit, wait_job
from tests.workers.engines.chattts.conftest import requires_chattts
from tests.workers.engines.chattts.service import (
    SENTENCE,
    TERMINAL,
    Client,
    Service,
    heartbeat,
    heartbeat_after,
)

pytestmark = [pytest.mark.chattts, requires_chattts]


async def test_a_job_submitted_mid_run_streams_before_the_running_one_ends(
    client: Client, service: Service
) -> None:
    """Continuous batching, asserted: a job that arrives while a long one runs gets its first
    chunk of audio before the long job's last chunk, and the engine stepped both at once."""
    before = await heartbeat(client, service.worker)
    long = await submit(
        client, text=SENTENCE * 40, voice="en_male", seed=5, stream=True, cache=False
    )
    events = await client.get(long["events_url"])
    long_audio: list[float] = []
    late: dict[str, Any] | None = None
    async with asyncio.timeout(90):
        async for event in sse_events(events):
            data = event.json()
            if event.event == "audio":
                long_audio.append(data["ts"])
                if late is None:  # the long job is streaming: another arrives
                    late = await submit(
                        client, text="Hello there.", voice="zh_male", seed=6, stream=True
                    )
            if event.event in TERMINAL:
                break
    assert late is not None and data["type"] == "succeeded", data
    late_events = [e.json() for e in await collect(client, late["events_url"])]
    late_audio = [e["ts"] for e in late_events if e["type"] == "audio"]
    assert late_events[-1]["type"] == "succeeded" and late_audio
    assert late_audio[0] < long_audio[-1], (late_audio, long_audio[-3:])
    after = await heartbeat_after(client, service.worker, before["jobs_succeeded"] + 2)
    stats = after["engine_stats"], before["engine_stats"]
    assert stats[0]["runtime_shared_steps"] > stats[1]["runtime_shared_steps"]


async def collect(client: Client, url: str) -> list[Any]:
    response = await client.get(url)
    out = []
    async with asyncio.timeout(60):
        async for event in sse_events(response):
            out.append(event)
            if event.event in TERMINAL:
                return out
    return out


@pytest.mark.parametrize("start", ["gapless", "now"])
async def test_openai_streamed_speech_arrives_in_chunks_that_join_into_the_file(
    client: Client, service: Service, start: str
) -> None:
    """Through the whole service: `stream_format: audio` answers with PCM as the runtime
    decodes it (held until it can play without a gap, or at once), sub-segment chunks
    included, and the bytes are the job's final file."""
    body = {
        "stream_start": start,
        "model": "tts-1",
        "input": SENTENCE * 4,
        "voice": "en_male",
        "response_format": "pcm",
        "stream_format": "audio",
        "seed": 9,
    }
    pieces: list[bytes] = []
    async with client.post("/v1/audio/speech", json=body) as response:
        assert response.status == 200, await response.text()
        job_id = response.headers["X-Job-Id"]
        async for piece in response.content.iter_any():
            pieces.append(piece)
    streamed = b"".join(pieces)
    job = await wait_job(client, job_id, TERMINAL, timeout=30)
    assert job["state"] == "succeeded" and job["chunks_done"] >= job["segments_total"], job
    final = await (await client.get(f"/v1/tts/jobs/{job_id}/audio")).read()
    assert streamed == final and len(streamed) > 0
