"""The seed-era endpoints keep their request and response shapes for old clients."""

from __future__ import annotations

import asyncio
import base64
import io
import time
from typing import Any

import pytest
import soundfile as sf
from aiohttp.test_utils import TestClient

from tests.conftest import ClientFactory, WorkerProcess

Client = TestClient[Any, Any]


async def _poll(client: Client, task_id: str, timeout: float = 20) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        response = await client.get(f"/tts/query/{task_id}")
        assert response.status == 200
        body: dict[str, Any] = await response.json()
        if body["status"] != "PENDING":
            return body
        assert body == {"status": "PENDING"}
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)


async def test_submit_then_poll_until_done(client: Client, worker: WorkerProcess) -> None:
    response = await client.post("/tts/submit", json={"text": "你好，老朋友", "voice": "zh_male"})
    assert response.status == 200
    body = await response.json()
    assert set(body) == {"task_id", "estimate"}
    assert isinstance(body["task_id"], str) and isinstance(body["estimate"], int)
    done = await _poll(client, body["task_id"])
    assert set(done) == {"status", "audio"} and done["status"] == "DONE"
    wav = base64.b64decode(done["audio"])
    assert wav[:4] == b"RIFF" and wav[8:12] == b"WAVE"
    samples, rate = sf.read(io.BytesIO(wav))
    assert len(samples) / rate > 0.3
    # The id works with the dashes of the old uuid format too, and in the new API.
    task_id = body["task_id"]
    dashed = f"{task_id[:8]}-{task_id[8:12]}-{task_id[12:16]}-{task_id[16:20]}-{task_id[20:]}"
    assert (await (await client.get(f"/tts/query/{dashed}")).json())["status"] == "DONE"
    assert (await client.get(f"/v1/tts/jobs/{task_id}")).status == 200


async def test_default_voice_and_pending(client: Client) -> None:
    response = await client.post("/tts/submit", json={"text": "no worker yet"})
    task_id = (await response.json())["task_id"]
    assert await (await client.get(f"/tts/query/{task_id}")).json() == {"status": "PENDING"}
    job = await (await client.get(f"/v1/tts/jobs/{task_id}")).json()
    assert job["voice"] == "en_female" and job["format"] == "wav"  # by the text's language
    await client.delete(f"/v1/tts/jobs/{task_id}")
    failed = await (await client.get(f"/tts/query/{task_id}")).json()
    assert failed["status"] == "FAILED" and "cancelled" in failed["error"]


@pytest.mark.parametrize(
    ("payload", "loc", "kind"),
    [
        ({"text": ""}, ["body", "text"], "string_too_short"),
        ({"text": "\u200b\u200b"}, ["body", "text"], "string_too_short"),
        ({"text": "字" * 501}, ["body", "text"], "string_too_long"),
        ({"text": "hi", "voice": "darth"}, ["body", "voice"], "string_pattern_mismatch"),
        ({"text": 5}, ["body", "text"], "string_type"),
        ({}, ["body", "text"], "missing"),
        ({"text": "!!!"}, ["body", "text"], "value_error"),
        # Checked at the one door every API submits through, as a job's text is.
        ({"text": "hello [not_a_token]"}, ["body", "text"], "value_error"),
    ],
)
async def test_validation_errors_in_fastapi_shape(
    client: Client, payload: Any, loc: list[str], kind: str
) -> None:
    response = await client.post("/tts/submit", json=payload)
    assert response.status == 422
    body = await response.json()
    assert list(body) == ["detail"]
    (error,) = body["detail"]
    assert error["loc"] == loc and error["type"] == kind and error["msg"]


async def test_broken_bodies_and_unknown_task(make_client: ClientFactory) -> None:
    client = await make_client(max_body_bytes=1000)
    response = await client.post(
        "/tts/submit", data=b"{nope", headers={"Content-Type": "application/json"}
    )
    assert response.status == 422
    assert (await response.json())["detail"][0]["type"] == "json_invalid"
    response = await client.post("/tts/submit", json={"text": "a" * 2000})
    assert response.status == 413
    assert "detail" in await response.json()
    response = await client.get("/tts/query/" + "0" * 32)
    assert response.status == 404
    assert "detail" in await response.json()
    response = await client.get("/tts/query/garbage")
    assert response.status == 404


async def test_a_lower_server_limit_applies(make_client: ClientFactory) -> None:
    client = await make_client(max_text_chars=10)
    response = await client.post("/tts/submit", json={"text": "x" * 11})
    assert response.status == 422
    (error,) = (await response.json())["detail"]
    assert error["type"] == "string_too_long" and error["ctx"] == {"max_length": 10}
