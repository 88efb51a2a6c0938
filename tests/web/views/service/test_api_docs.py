"""`/openapi.json` and `/docs`: every route is in the document, and its body schemas accept what
the service accepts and refuse what it refuses for its shape (checked with `jsonschema`)."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from jsonschema import Draft202012Validator

from tests.conftest import ClientFactory, WorkerProcess
from web.appkeys import SETTINGS

Client = TestClient[Any, Any]

JOBS = (
    ({"text": "Hello."}, True),
    ({"text": "你好。", "voice": "zh_male", "format": "mp3", "speed": 1.5, "seed": 7}, True),
    ({"text": "Hello.", "voice": "alloy", "stream": True, "priority": "bulk"}, True),
    ({"text": "Hi.", "callback_url": "https://example.com/hook", "cache": False}, True),
    ({"text": "Hi.", "refine": True, "prompt": "[oral_2]", "top_k": 5, "top_p": 0.5}, True),
    ({"text": "Hi.", "colour": "blue"}, False),
    ({"text": "Hi.", "speed": 3}, False),
    ({"text": "Hi.", "format": "midi"}, False),
    ({"text": "Hi.", "seed": -1}, False),
    ({"voice": "en_male"}, False),
    ({"text": 5}, False),
)
SPEECH = (
    ({"model": "tts-1", "input": "Hello."}, True),
    ({"model": "tts-1", "input": "Hi.", "voice": {"id": "nova"}, "response_format": "wav"}, True),
    ({"model": "x", "input": "Hi.", "speed": 0.25, "stream_format": "sse", "seed": 3}, True),
    ({"model": "tts-1", "input": "Hi.", "instructions": "calm", "voice": "en_female"}, True),
    ({"model": "tts-1", "input": "Hi.", "response_format": "midi"}, False),
    ({"model": "tts-1", "input": "Hi.", "speed": 9}, False),
    ({"model": "tts-1", "input": "Hi.", "extra": 1}, False),
    ({"input": "Hi."}, False),
    ({"model": "tts-1"}, False),
    ({"model": "tts-1", "input": "x" * 4001}, False),  # CHATTTS_MAX_TEXT_CHARS (4000) bounds it
)
LEGACY = (({"text": "Hello."}, True), ({"text": "Hi.", "voice": "zh_male"}, True), ({}, False))


async def test_every_route_is_documented(client: Client) -> None:
    response = await client.get("/openapi.json")
    assert response.status == 200
    doc = await response.json()
    assert doc["openapi"] == "3.1.0"
    routes = {
        (route.method.lower(), route.resource.canonical)
        for route in client.app.router.routes()
        if route.method != "HEAD" and route.resource is not None
        if route.resource.name != "static"
    }
    documented = {(method, path) for path, methods in doc["paths"].items() for method in methods}
    assert routes == documented
    for methods in doc["paths"].values():
        for op in methods.values():
            for content in op.get("requestBody", {}).get("content", {}).values():
                Draft202012Validator.check_schema(content["schema"])


@pytest.mark.parametrize(
    ("path", "cases"),
    [("/v1/tts/jobs", JOBS), ("/v1/audio/speech", SPEECH), ("/tts/submit", LEGACY)],
)
async def test_the_schemas_take_what_the_service_takes(
    client: Client,
    worker: WorkerProcess,
    path: str,
    cases: tuple[tuple[dict[str, Any], bool], ...],
) -> None:
    doc = await (await client.get("/openapi.json")).json()
    schema = doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
    validator = Draft202012Validator(schema)
    for body, accepted in cases:
        response = await client.post(path, json=body)
        await response.read()
        assert (response.status < 400) == accepted, (body, response.status)
        assert validator.is_valid(body) == accepted, (body, list(validator.iter_errors(body)))


async def test_the_docs_page_lists_every_operation_from_this_server(client: Client) -> None:
    doc = await (await client.get("/openapi.json")).json()
    page = await client.get("/docs")
    assert page.status == 200 and page.content_type == "text/html"
    html = await page.text()
    for path in doc["paths"]:
        assert f"<code>{path}</code>" in html, path
    assert "http://" not in html and "https://" not in html  # nothing from elsewhere
    port = client.app[SETTINGS].web.port  # its example names this service's port
    assert f"curl -s localhost:{port}/v1/voices" in html


async def test_the_docs_example_names_the_public_url(make_client: ClientFactory) -> None:
    client = await make_client(port=8123, public_url="https://tts.example.com/")
    html = await (await client.get("/docs")).text()
    assert "curl -s https://tts.example.com/v1/voices" in html
