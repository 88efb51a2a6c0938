"""What OpenAI-compatible front ends probe: the model list in OpenAI's shape, and every voice name
a request may use in Kokoro-FastAPI's, the caller's registered voices and nobody else's."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient

from core.queue.voices import BUILTIN_VOICES, OPENAI_VOICES
from tests.conftest import ClientFactory
from tests.support.voices import EMBEDDING

Client = TestClient[Any, Any]


async def test_models_in_openais_list_shape(client: Client) -> None:
    response = await client.get("/v1/models")
    assert response.status == 200
    body = await response.json()
    assert body["object"] == "list"
    ids = [model["id"] for model in body["data"]]
    assert ids[:2] == ["tts-1", "tts-1-hd"]
    assert all(m["object"] == "model" and m["owned_by"] for m in body["data"])


async def test_audio_voices_are_every_name_a_voice_may_be(make_client: ClientFactory) -> None:
    mine, theirs = await make_client(), await make_client()
    voice = {"name": "mine-only", "embedding": EMBEDDING}
    assert (await mine.post("/v1/voices", json=voice)).status == 201
    names = (await (await mine.get("/v1/audio/voices")).json())["voices"]
    assert {"alloy", "nova", *OPENAI_VOICES} <= set(names)
    assert {v.name for v in BUILTIN_VOICES} <= set(names) and "mine-only" in names
    others = (await (await theirs.get("/v1/audio/voices")).json())["voices"]
    assert "mine-only" not in others
    for name in ("alloy", "zh_male", "mine-only"):  # and each is taken by a submission
        response = await mine.post("/v1/tts/jobs", json={"text": "Hello.", "voice": name})
        assert response.status == 202, await response.text()
