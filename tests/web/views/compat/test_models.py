"""What OpenAI-compatible front ends probe, replayed as they send it: the model list and a model in
OpenAI's shape (through the `openai` client), voices and models in the shape Open WebUI reads,
without a key where keys are set, and every voice name a request may use, the caller's registered
voices and nobody else's."""

from __future__ import annotations

from typing import Any

import openai
import pytest
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
    names = [v["id"] for v in (await (await mine.get("/v1/audio/voices")).json())["voices"]]
    assert {"alloy", "nova", *OPENAI_VOICES} <= set(names)
    assert {v.name for v in BUILTIN_VOICES} <= set(names) and "mine-only" in names
    others = [v["id"] for v in (await (await theirs.get("/v1/audio/voices")).json())["voices"]]
    assert "mine-only" not in others
    for name in ("alloy", "zh_male", "mine-only"):  # and each is taken by a submission
        response = await mine.post("/v1/tts/jobs", json={"text": "Hello.", "voice": name})
        assert response.status == 202, await response.text()


async def test_open_webuis_probes_without_a_key(make_client: ClientFactory) -> None:
    """Open WebUI asks for voices and models with no Authorization header, and reads
    `{"voices": [{"id", "name"}]}` and `{"models": [{"id"}]}`; the API itself still needs a key."""
    client = await make_client(api_keys="sk-real")
    voices = await client.get("/v1/audio/voices")
    assert voices.status == 200, await voices.text()
    listed = (await voices.json())["voices"]
    assert all(set(v) == {"id", "name"} and v["name"] for v in listed)
    assert {"alloy", "zh_female"} <= {v["id"] for v in listed}
    models = await client.get("/v1/audio/models")
    assert models.status == 200
    assert [m["id"] for m in (await models.json())["models"]][:2] == ["tts-1", "tts-1-hd"]
    assert (await client.get("/v1/models")).status == 200
    assert (await client.get("/v1/models/tts-1")).status == 200
    refused = await client.post("/v1/audio/speech", json={"model": "tts-1", "input": "Hi."})
    assert refused.status == 401
    assert (await client.get("/v1/voices")).status == 401  # ours, not a probe


async def test_a_setting_puts_discovery_behind_the_key(make_client: ClientFactory) -> None:
    client = await make_client(api_keys="sk-real", discovery_needs_key=True)
    for path in ("/v1/audio/voices", "/v1/audio/models", "/v1/models", "/v1/models/tts-1"):
        assert (await client.get(path)).status == 401, path
        keyed = await client.get(path, headers={"Authorization": "Bearer sk-real"})
        assert keyed.status == 200, path


async def test_the_openai_client_retrieves_a_model(client: Client) -> None:
    sdk = openai.AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key="x", max_retries=0)
    model = await sdk.models.retrieve("tts-1")
    assert model.id == "tts-1" and model.object == "model" and model.owned_by
    with pytest.raises(openai.NotFoundError) as caught:
        await sdk.models.retrieve("no-such-model")
    assert caught.value.code == "model_not_found"
    await sdk.close()


async def test_sillytaverns_empty_bearer_is_no_key(client: Client) -> None:
    """SillyTavern sends `Authorization: Bearer ` with nothing after it when no key is set."""
    for header in ("Bearer ", "Bearer"):
        response = await client.get("/v1/audio/voices", headers={"Authorization": header})
        assert response.status == 200, header
