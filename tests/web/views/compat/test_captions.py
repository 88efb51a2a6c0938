"""`POST /dev/captioned_speech`: Kokoro's captioned speech, its audio and word timestamps from a
real worker; what it refuses."""

from __future__ import annotations

import base64
import io
import itertools
from typing import Any

import soundfile as sf
from aiohttp.test_utils import TestClient

from tests.conftest import ClientFactory, WorkerProcess

Client = TestClient[Any, Any]
TEXT = "Hello there, my friend. [lbreak] How are you today?"


async def test_speech_with_its_words_timed(client: Client, worker: WorkerProcess) -> None:
    body = {"model": "kokoro", "input": TEXT, "voice": "alloy", "response_format": "wav"}
    response = await client.post("/dev/captioned_speech", json={**body, "lang_code": "a"})
    assert response.status == 200, await response.text()
    answer = await response.json()
    samples, rate = sf.read(io.BytesIO(base64.b64decode(answer["audio"])))
    duration = len(samples) / rate
    words = answer["timestamps"]
    assert [w["word"] for w in words] == [
        "Hello",
        "there,",
        "my",
        "friend.",
        "How",
        "are",
        "you",
        "today?",
    ]
    assert answer["timestamps_estimated"] is False and answer["audio_format"] == "wav"
    assert all(a["end_time"] <= b["start_time"] + 1e-3 for a, b in itertools.pairwise(words))
    assert words[0]["start_time"] >= 0 and words[-1]["end_time"] <= duration + 1e-3
    # "[lbreak]" is 600 ms of silence before "How": the word starts after it.
    how = next(w for w in words if w["word"] == "How")
    at = round(how["start_time"] * rate)
    assert float(abs(samples[at - rate // 2 : at - rate // 50]).max()) < 0.01
    job = await (await client.get(f"/v1/tts/jobs/{answer['job_id']}")).json()
    assert job["voice"] == "en_female" and response.headers["X-Job-Id"] == answer["job_id"]
    none = await client.post("/dev/captioned_speech", json={**body, "return_timestamps": False})
    assert (await none.json())["timestamps"] is None


async def test_what_it_refuses(make_client: ClientFactory) -> None:
    client = await make_client()
    base = {"model": "tts-1", "input": "Hi."}
    for extra, param in (
        ({"stream": True}, "stream"),
        ({"stream_format": "sse"}, "stream"),
        ({"return_timestamps": "yes"}, "return_timestamps"),
        ({"lang_code": 5}, "lang_code"),
        ({"speed": 9}, "speed"),
    ):
        response = await client.post("/dev/captioned_speech", json={**base, **extra})
        assert response.status == 400, extra
        assert (await response.json())["error"]["param"] == param
    keyed = await make_client(api_keys="k1")
    refused = await keyed.post("/dev/captioned_speech", json=base)
    assert refused.status == 401
