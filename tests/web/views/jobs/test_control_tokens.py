"""ChatTTS's control tokens and `normalize` at submission, through the real application: unknown
tokens are a 422 that names them, accepted ones are queued verbatim, the sentence prompt is checked,
and text that cannot be spoken without our spelling is refused when only ChatTTS runs."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient

from core.queue.keys import Keys
from tests.conftest import ClientFactory
from tests.web.conftest import live_worker, submit

Client = TestClient[Any, Any]


async def _error(client: Client, payload: dict[str, Any], status: int = 422) -> dict[str, Any]:
    response = await client.post("/v1/tts/jobs", json=payload)
    body = await response.json()
    assert response.status == status, body
    error: dict[str, Any] = body["error"]
    return error


async def _stored(aredis: Any, keys: Keys, job_id: str) -> dict[str, Any]:
    stored: dict[str, Any] = orjson.loads(await aredis.hget(keys.job(job_id), "request"))
    return stored


@pytest.mark.parametrize(
    ("text", "token"),
    [
        ("Hello [cough] there", "[cough]"),
        ("你好[break_9]世界", "[break_9]"),
        ("[oral_x] hi", "[oral_x]"),
        ("see [note] below", "[note]"),
        ("what [Laugh] now", "[Laugh]"),
    ],
)
async def test_an_unknown_token_in_the_text_is_a_422_that_names_it(
    client: Client, text: str, token: str
) -> None:
    error = await _error(client, {"text": text})
    assert error["code"] == "unknown_control_token" and error["param"] == "text"
    message = error["message"]
    assert f"unknown control token {token}" in message
    for accepted in ("[uv_break]", "[v_break]", "[lbreak]", "[laugh]", "[oral_0]", "[break_7]"):
        assert accepted in message


async def test_a_token_used_in_the_wrong_place_says_where_it_goes(client: Client) -> None:
    error = await _error(client, {"text": "hi [speed_9]"})
    assert error["code"] == "misplaced_control_token" and "'speed' field" in error["message"]
    error = await _error(client, {"text": "hi [Stts] there"})
    assert error["code"] == "misplaced_control_token" and "[Stts]" in error["message"]


async def test_accepted_tokens_and_plain_brackets_are_queued_verbatim(
    client: Client, aredis: Any, keys: Keys
) -> None:
    text = "What is [uv_break]your favorite english food?[laugh][lbreak] See note [1]."
    body = await submit(client, text=text)
    assert (await _stored(aredis, keys, body["id"]))["text"] == text


async def test_a_text_of_tokens_alone_is_not_speakable(client: Client) -> None:
    error = await _error(client, {"text": "[laugh] [uv_break]"})
    assert error["code"] == "text_not_speakable" and "[laugh]" in error["message"]


async def test_the_sentence_prompt_is_checked_compacted_and_stored(
    client: Client, aredis: Any, keys: Keys
) -> None:
    body = await submit(client, text="你好", refine=True, prompt=" [oral_2] [laugh_0][break_6] ")
    stored = await _stored(aredis, keys, body["id"])
    assert stored["prompt"] == "[oral_2][laugh_0][break_6]" and stored["refine"] is True

    error = await _error(client, {"text": "hi", "refine": True, "prompt": "[oral_2][break_9]"})
    assert error["code"] == "unknown_control_token" and error["param"] == "prompt"
    assert "[break_9]" in error["message"] and "[oral_9]" in error["message"]
    error = await _error(client, {"text": "hi", "refine": True, "prompt": "[cough]"})
    assert error["code"] == "unknown_control_token" and "[cough]" in error["message"]
    error = await _error(client, {"text": "hi", "refine": True, "prompt": "be cheerful"})
    assert error["code"] == "invalid_prompt" and error["param"] == "prompt"
    error = await _error(client, {"text": "hi", "refine": True, "prompt": "[laugh]"})
    assert error["code"] == "misplaced_control_token" and "'text'" in error["message"]
    error = await _error(client, {"text": "hi", "refine": True, "prompt": 7})
    assert error["code"] == "invalid_prompt" and error["param"] == "prompt"


async def test_a_prompt_needs_the_refinement_pass(client: Client) -> None:
    error = await _error(client, {"text": "hi", "prompt": "[oral_2]"})
    assert error["code"] == "prompt_needs_refine" and "'refine': true" in error["message"]


async def test_normalize_is_stored_and_defaults_to_true(
    client: Client, aredis: Any, keys: Keys
) -> None:
    default = await submit(client, text="hi")
    verbatim = await submit(client, text="hi", normalize=False)
    assert (await _stored(aredis, keys, default["id"]))["normalize"] is True
    assert (await _stored(aredis, keys, verbatim["id"]))["normalize"] is False
    error = await _error(client, {"text": "hi", "normalize": "maybe"})
    assert error["param"] == "normalize"


async def test_without_normalization_digits_alone_are_refused_when_only_chattts_runs(
    make_client: ClientFactory, aredis: Any, keys: Keys
) -> None:
    client = await make_client()
    # No ChatTTS worker yet: eSpeak NG would read the digits.
    await submit(client, text="123", normalize=False)

    await live_worker(aredis, keys, "chattts", "tts-1")
    client = await make_client()
    await submit(client, text="123")  # spelled out: "one hundred and twenty three"
    await submit(client, text="I have 3 cats", normalize=False)  # "I have cats"
    error = await _error(client, {"text": "123", "normalize": False})
    assert error["code"] == "text_not_speakable" and error["param"] == "text"
    assert "'normalize': false" in error["message"]
    error = await _error(client, {"text": "12 [laugh] 34", "normalize": False})
    assert error["code"] == "text_not_speakable"
