"""`GET /v1/tts/jobs/{id}/stream`: a streaming job's PCM as it is made, resumable at a byte."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import numpy as np
import soundfile as sf
from aiohttp.test_utils import TestClient

from tests.conftest import WorkerProcess
from tests.web.conftest import submit, wait_job

Client = TestClient[Any, Any]
LONG = "This sentence is one of several that make a long text to speak. " * 8


async def _stream(client: Client, job_id: str, query: str = "") -> tuple[int, bytes, Any]:
    response = await client.get(f"/v1/tts/jobs/{job_id}/stream{query}")
    return response.status, await response.read(), response


async def test_the_stream_is_the_jobs_samples_from_any_byte(
    client: Client, worker: WorkerProcess
) -> None:
    """Opened as soon as the job is accepted, the body is the job's samples as they are made:
    exactly the final file's, for a WAV job too; and again from any even byte."""
    job = await submit(client, text=LONG, voice="en_male", format="wav", stream=True)
    status, body, response = await _stream(client, job["id"])
    assert status == 200, body
    assert response.headers["Content-Type"].startswith("audio/pcm")
    assert response.headers["X-Sample-Rate"] == "24000"
    assert response.headers["X-Job-Id"] == job["id"]
    done = await wait_job(client, job["id"], ("succeeded",))
    assert done["segments_total"] >= 2 and done["chunks_done"] >= 2, done
    wav = await (await client.get(f"/v1/tts/jobs/{job['id']}/audio")).read()
    samples, rate = sf.read(io.BytesIO(wav), dtype="int16")
    assert rate == 24_000
    assert body == samples.astype("<i2").tobytes()

    for offset in (2, 4800, len(body) // 2 & ~1, len(body)):
        status, rest, _ = await _stream(client, job["id"], f"?offset={offset}")
        assert status == 200 and rest == body[offset:], offset
    status, rest, _ = await _stream(client, job["id"], f"?offset={len(body) + 2}")
    assert status == 416 and b"offset_past_end" in rest and str(len(body)).encode() in rest


async def test_a_stream_opened_mid_job_starts_from_the_first_sample(
    client: Client, worker: WorkerProcess
) -> None:
    job = await submit(client, text=LONG * 2, voice="en_female", format="pcm", stream=True)
    await asyncio.sleep(0.05)
    first = asyncio.create_task(_stream(client, job["id"]))
    await wait_job(client, job["id"], ("running", "succeeded"))
    second = await _stream(client, job["id"])
    pcm = await (await client.get(f"/v1/tts/jobs/{job['id']}/audio")).read()
    assert (await first)[1] == second[1] == pcm
    assert np.abs(np.frombuffer(pcm, "<i2")).max() > 300  # speech, not silence


async def test_refusals_say_what_to_do(client: Client, worker: WorkerProcess) -> None:
    status, body, _ = await _stream(client, "0" * 32)
    assert status == 404 and b"job_not_found" in body
    plain = await submit(client, text="Not streamed.", voice="en_male")
    status, body, _ = await _stream(client, plain["id"])
    assert status == 409 and b"not_streamed" in body and b"/audio" in body, body
    streamed = await submit(client, text="Streamed.", voice="en_male", stream=True)
    for bad in ("-2", "3", "abc", "1" * 20, "²", "٢"):  # superscript and Arabic-Indic digits
        status, body, _ = await _stream(client, streamed["id"], f"?offset={bad}")
        assert status == 400 and b"invalid_offset" in body, (bad, body)


async def test_a_cache_hit_streams_nothing(client: Client, worker: WorkerProcess) -> None:
    """The second identical request is served from the cache at once: no chunks, an empty body
    (its file is at audio_url); a PCM job's stream is its whole file instead."""
    request = {"text": "Said twice.", "voice": "en_female", "stream": True}
    first = await submit(client, **request)
    await wait_job(client, first["id"], ("succeeded",))
    again = await submit(client, **request)
    assert (await wait_job(client, again["id"], ("succeeded",))).get("cached") is True
    status, body, _ = await _stream(client, again["id"])
    assert status == 200 and body == b""

    pcm_request = {**request, "format": "pcm"}
    first = await submit(client, **pcm_request)
    await wait_job(client, first["id"], ("succeeded",))
    again = await submit(client, **pcm_request)
    await wait_job(client, again["id"], ("succeeded",))
    status, body, _ = await _stream(client, again["id"])
    pcm = await (await client.get(f"/v1/tts/jobs/{again['id']}/audio")).read()
    assert status == 200 and body == pcm and pcm


async def test_a_cancelled_job_ends_its_stream_with_an_error(client: Client) -> None:
    job = await submit(client, text=LONG, voice="en_male", stream=True)  # no worker: it waits
    pending = asyncio.create_task(_stream(client, job["id"]))
    await asyncio.sleep(0.3)
    await client.delete(f"/v1/tts/jobs/{job['id']}")
    async with asyncio.timeout(10):
        status, body, _ = await pending
    assert status == 409 and b"job_cancelled" in body, body


async def test_streams_hold_a_connection_lease(make_client: Any) -> None:
    """Each open stream holds one of its address's stream leases: past the cap, 429 at once."""
    client = await make_client(streams_per_address=2)
    job = await submit(client, text=LONG, voice="en_male", stream=True)  # no worker: it waits
    held = [asyncio.create_task(_stream(client, job["id"])) for _ in range(2)]
    await asyncio.sleep(0.5)
    status, body, response = await _stream(client, job["id"])
    assert status == 429 and b"waiting at once from this address" in body, body
    assert response.headers["Retry-After"]
    await client.delete(f"/v1/tts/jobs/{job['id']}")
    async with asyncio.timeout(10):
        for task in held:
            assert (await task)[0] == 409
    again = await submit(client, text="Streamed again.", voice="en_male", stream=True)
    pending = asyncio.create_task(_stream(client, again["id"]))  # the leases were given back
    await asyncio.sleep(0.5)
    assert not pending.done()
    await client.delete(f"/v1/tts/jobs/{again['id']}")
    async with asyncio.timeout(10):
        assert (await pending)[0] == 409
