"""Voice registration and submit-time speakability through the HTTP API, without a model.

Voice data is validated by the web tier without torch; synthesizing with registered voices on a
real ChatTTS worker is tested in tests/workers/engines/chattts/test_service.py.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp.test_utils import TestClient

from core.queue.keys import Keys
from core.voices.chattts import validate_voice_data
from tests.conftest import ClientFactory
from tests.support.voices import EMBEDDING, recording_form, wav_bytes
from tests.web.conftest import live_worker, submit
from web.monitors.fleet import ENGINES_TTL_S

Client = TestClient[Any, Any]


async def test_register_use_and_delete_an_embedding_voice(
    client: Client, aredis: Any, keys: Keys
) -> None:
    response = await client.post(
        "/v1/voices",
        json={"name": "narrator-1", "embedding": EMBEDDING, "language": "en-GB", "gender": "male"},
    )
    body = await response.json()
    assert response.status == 201, body
    assert response.headers["Location"] == "/v1/voices/narrator-1"
    assert body["name"] == "narrator-1" and body["kind"] == "embedding"
    assert body["language"] == "en-GB" and body["builtin"] is False
    assert "embedding" not in body
    stored = orjson.loads(await aredis.hget(keys.voices, "narrator-1"))
    assert "embedding" not in stored and stored["builtin"] is False  # metadata apart from data
    assert (await aredis.hget(keys.voice_data, "narrator-1")).decode() == EMBEDDING
    assert stored["created_at"] == pytest.approx(time.time(), abs=60)

    listed = await (await client.get("/v1/voices")).json()
    entry = next(v for v in listed["voices"] if v["name"] == "narrator-1")
    assert "embedding" not in entry and entry["gender"] == "male"
    assert (await (await client.get("/v1/voices/narrator-1")).json())["kind"] == "embedding"
    await submit(client, text="Hello there.", voice="narrator-1")
    async with aiohttp.ClientSession() as stranger:  # another client: not theirs to see
        other = await stranger.get(client.make_url("/v1/voices/narrator-1"))
        assert other.status == 404 and (await other.json())["error"]["code"] == "voice_not_found"

    again = await client.post("/v1/voices", json={"name": "narrator-1", "embedding": EMBEDDING})
    assert again.status == 409 and (await again.json())["error"]["code"] == "voice_exists"

    deleted = await client.delete("/v1/voices/narrator-1")
    assert deleted.status == 200 and (await deleted.json())["deleted"] is True
    assert (await client.delete("/v1/voices/narrator-1")).status == 404
    assert (await client.get("/v1/voices/narrator-1")).status == 404
    refused = await client.post("/v1/tts/jobs", json={"text": "Hello", "voice": "narrator-1"})
    assert refused.status == 422
    assert (await refused.json())["error"]["code"] == "unknown_voice"


@pytest.mark.parametrize(
    ("payload", "status", "code", "words"),
    [
        ({"name": "A", "embedding": EMBEDDING}, 422, "invalid_voice_name", "lowercase"),
        ({"name": "has space", "embedding": EMBEDDING}, 422, "invalid_voice_name", "2 to 41"),
        ({"name": "-x", "embedding": EMBEDDING}, 422, "invalid_voice_name", "starting"),
        ({"name": "a" * 42, "embedding": EMBEDDING}, 422, "invalid_voice_name", "2 to 41"),
        ({"name": "zh_female", "embedding": EMBEDDING}, 409, "voice_exists", "built-in"),
        ({"name": "mine"}, 422, "missing_field", "speaker embedding"),
        ({"name": "mine", "embedding": "hello"}, 422, "invalid_voice_data", "base16384"),
        ({"name": "mine", "embedding": "{}"}, 422, "invalid_voice_data", "chattts"),
        ({"name": "mine", "embedding": EMBEDDING, "pitch": 3}, 422, "unknown_field", "pitch"),
        ({"name": "mine", "embedding": EMBEDDING, "language": "??"}, 422, "invalid_language", ""),
        ({"name": "mine", "embedding": EMBEDDING, "gender": 1}, 422, "invalid_gender", ""),
        ([1], 422, "invalid_body", "object"),
    ],
)
async def test_invalid_registrations_are_explained(
    client: Client, payload: Any, status: int, code: str, words: str
) -> None:
    response = await client.post("/v1/voices", json=payload)
    body = await response.json()
    assert response.status == status, body
    assert body["error"]["code"] == code and words in body["error"]["message"]


async def test_wrong_content_type_and_deleting_builtins(client: Client) -> None:
    response = await client.post(
        "/v1/voices", data=b"name=x", headers={"Content-Type": "text/plain"}
    )
    assert response.status == 415
    assert "multipart/form-data" in (await response.json())["error"]["message"]
    builtin = await client.delete("/v1/voices/zh_female")
    assert builtin.status == 409 and (await builtin.json())["error"]["code"] == "voice_builtin"
    assert (await client.delete("/v1/voices/NOPE")).status == 404
    assert (await client.get("/v1/voices/zh_male")).status == 200


async def test_register_a_reference_recording(client: Client, aredis: Any, keys: Keys) -> None:
    form = recording_form("my-voice", wav_bytes(2.0, 44_100, "FLAC"), "这是我的声音")
    response = await client.post("/v1/voices", data=form)
    body = await response.json()
    assert response.status == 201, body
    assert body["kind"] == "recording" and body["language"] == "zh-CN"
    stored = (await aredis.hget(keys.voice_data, "my-voice")).decode()
    assert validate_voice_data(stored) == "recording"
    listed = await (await client.get("/v1/voices")).json()
    assert "embedding" not in next(v for v in listed["voices"] if v["name"] == "my-voice")


@pytest.mark.parametrize(
    ("audio", "transcript", "status", "code", "words"),
    [
        (wav_bytes(0.5), "hello", 422, "invalid_voice_data", "lasts 0.5 s"),
        (wav_bytes(21.0, 8_000), "hello", 422, "invalid_voice_data", "lasts 21.0 s"),
        (b"RIFF not really a wave file", "hello", 422, "invalid_voice_data", "decoded"),
        (None, "hello", 422, "missing_field", "'audio' is required"),
        (wav_bytes(2.0), None, 422, "invalid_transcript", "transcript"),
        (wav_bytes(2.0), "😀", 422, "invalid_voice_data", "transcript"),
        (b"\0" * (11 * 1024 * 1024), "hello", 413, "body_too_large", "limit"),
    ],
)
async def test_invalid_recordings_are_explained(
    client: Client, audio: bytes | None, transcript: str | None, status: int, code: str, words: str
) -> None:
    response = await client.post("/v1/voices", data=recording_form("rec", audio, transcript))
    body = await response.json()
    assert response.status == status, body
    assert body["error"]["code"] == code and words in body["error"]["message"]


@pytest.mark.parametrize(
    ("content_type", "body"),
    [("multipart/form-data", b"x"), ("multipart/form-data; boundary=zz", b"no boundary here")],
)
async def test_unreadable_forms_are_400(client: Client, content_type: str, body: bytes) -> None:
    response = await client.post("/v1/voices", data=body, headers={"Content-Type": content_type})
    assert response.status == 400
    assert (await response.json())["error"]["code"] == "invalid_multipart"


async def test_text_chattts_cannot_speak_is_refused_when_only_chattts_runs(
    make_client: ClientFactory, aredis: Any, keys: Keys
) -> None:
    text = "Привет, мир"  # letters, but none ChatTTS reads
    await live_worker(aredis, keys, "espeak")
    assert (await (await make_client()).post("/v1/tts/jobs", json={"text": text})).status == 202

    await aredis.delete(keys.worker("espeak"))
    await live_worker(aredis, keys, "chattts")
    client = await make_client()
    response = await client.post("/v1/tts/jobs", json={"text": text})
    body = await response.json()
    assert response.status == 422, body
    assert body["error"]["code"] == "text_not_speakable" and body["error"]["param"] == "text"
    assert "ChatTTS" in body["error"]["message"]
    for speakable in ("你好", "Hello", "123", "Привет 42"):
        assert (await client.post("/v1/tts/jobs", json={"text": speakable})).status == 202


async def test_a_registered_voice_is_refused_where_only_espeak_runs(
    make_client: ClientFactory, aredis: Any, keys: Keys
) -> None:
    """eSpeak NG speaks the built-in voices only: a job with a registered (ChatTTS) voice is
    refused while it is all that runs, never spoken in a stock voice; a chattts worker lifts it."""
    client = await make_client()
    voice = {"name": "narrator-x", "embedding": EMBEDDING}
    assert (await client.post("/v1/voices", json=voice)).status == 201
    await live_worker(aredis, keys, "espeak")
    response = await client.post("/v1/tts/jobs", json={"text": "Hello.", "voice": "narrator-x"})
    body = await response.json()
    assert response.status == 422, body
    assert body["error"]["code"] == "voice_needs_chattts" and body["error"]["param"] == "voice"
    assert "built-in" in body["error"]["message"]
    builtin = {"text": "Hello.", "voice": "en_male"}
    assert (await client.post("/v1/tts/jobs", json=builtin)).status == 202
    await live_worker(aredis, keys, "chattts")
    await asyncio.sleep(ENGINES_TTL_S)  # the web tier's look at the live engines is that old
    response = await client.post("/v1/tts/jobs", json={"text": "Hello.", "voice": "narrator-x"})
    assert response.status == 202, await response.text()
    listed = (await (await client.get("/v1/voices")).json())["voices"]
    assert next(v for v in listed if v["name"] == "narrator-x")["engines"] == ["chattts"]


async def test_a_job_without_a_voice_is_read_in_its_texts_language(client: Client) -> None:
    """The same rule on every API (the OpenAI one maps its default "alloy" the same way)."""
    listed = await (await client.get("/v1/voices")).json()
    by_language = listed["default_by_language"]
    assert by_language == {"zh": "zh_female", "en": "en_female"}
    for text, language in (("Good morning, everyone.", "en"), ("大家早上好。", "zh")):
        job = await submit(client, text=text)
        assert job["job"]["voice"] == by_language[language], text
        legacy = await (await client.post("/tts/submit", json={"text": text})).json()
        snapshot = await (await client.get(f"/v1/tts/jobs/{legacy['task_id']}")).json()
        assert snapshot["voice"] == by_language[language], text
    named = await submit(client, text="Good morning.", voice="zh_male")  # a choice is kept
    assert named["job"]["voice"] == "zh_male"
