"""CORS: what a page of another origin may read from the API, over the real app and real Redis."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from aiohttp import ClientResponse
from aiohttp.test_utils import TestClient

from core.infra.embedded_redis import EmbeddedRedis
from tests.conftest import ClientFactory
from tests.web.conftest import cookie, submit
from web.appkeys import THROUGHPUT
from web.clients.identity import ELEVENLABS_KEY_HEADER, TOKEN_HEADER
from web.middlewares.cors import MAX_AGE_S, REQUEST_HEADERS, RESPONSE_HEADERS

Client = TestClient[Any, Any]
APP = "https://app.example.com"
EVIL = "https://evil.example"
ALLOW_ORIGIN = "Access-Control-Allow-Origin"
ALLOW_CREDENTIALS = "Access-Control-Allow-Credentials"
CORS_HEADERS = (
    ALLOW_ORIGIN,
    ALLOW_CREDENTIALS,
    "Access-Control-Allow-Methods",
    "Access-Control-Allow-Headers",
    "Access-Control-Expose-Headers",
    "Access-Control-Max-Age",
)


async def preflight(
    client: Client, path: str, method: str, origin: str = APP, headers: str = "content-type"
) -> ClientResponse:
    """What a browser sends before a request a page could not send without asking: never a
    cookie (the client's jar is emptied)."""
    client.session.cookie_jar.clear()
    return await client.options(
        path,
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": method,
            "Access-Control-Request-Headers": headers,
        },
    )


def listed(response: ClientResponse, header: str) -> set[str]:
    return {name.strip().lower() for name in response.headers.get(header, "").split(",")}


def assert_no_cors(response: ClientResponse) -> None:
    present = [name for name in CORS_HEADERS if name in response.headers]
    assert not present, (response.status, present)


def assert_readable_by(response: ClientResponse, origin: str) -> None:
    """The page at `origin` may read this answer and send its cookie (a listed origin)."""
    assert response.headers.get(ALLOW_ORIGIN) == origin, dict(response.headers)
    assert response.headers.get(ALLOW_CREDENTIALS) == "true"
    assert "origin" in listed(response, "Vary")
    exposed = listed(response, "Access-Control-Expose-Headers")
    assert {"location", "x-client-token", "x-job-id", "retry-after"} <= exposed


async def test_off_by_default(client: Client) -> None:
    """No setting: no CORS header anywhere, and a preflight is refused, saying what to set."""
    answer = await client.get("/v1/voices", headers={"Origin": APP})
    assert answer.status == 200
    assert_no_cors(answer)
    assert "origin" not in listed(answer, "Vary")
    answer = await preflight(client, "/v1/tts/jobs", "POST")
    assert answer.status == 403
    assert_no_cors(answer)
    error = (await answer.json())["error"]
    assert error["code"] == "origin_not_allowed" and "CHATTTS_ALLOWED_ORIGINS" in error["message"]
    assert "Set-Cookie" not in answer.headers and TOKEN_HEADER not in answer.headers
    # A plain OPTIONS (not a preflight) is what it always was.
    assert (await client.options("/v1/tts/jobs")).status == 405


async def test_a_listed_origin_passes_its_preflight(make_client: ClientFactory) -> None:
    client = await make_client(allowed_origins=f"{APP}/, https://other.example")
    asked = "content-type, idempotency-key, x-stainless-os"
    answer = await preflight(client, "/v1/tts/jobs", "POST", headers=asked)
    assert answer.status == 204, await answer.text()
    assert answer.headers[ALLOW_ORIGIN] == APP
    assert answer.headers[ALLOW_CREDENTIALS] == "true"
    assert "origin" in listed(answer, "Vary")
    assert {"get", "post"} <= listed(answer, "Access-Control-Allow-Methods")
    allowed_headers = listed(answer, "Access-Control-Allow-Headers")
    assert {"content-type", "idempotency-key", "x-stainless-os"} <= allowed_headers
    assert {h.lower() for h in REQUEST_HEADERS} <= allowed_headers
    assert answer.headers["Access-Control-Max-Age"] == str(MAX_AGE_S)
    # A preflight is no client: no identity minted for it.
    assert "Set-Cookie" not in answer.headers and TOKEN_HEADER not in answer.headers
    # Each route's own methods: a job may be deleted, a voice too.
    job = await submit(client, text="Mine.")
    answer = await preflight(client, f"/v1/tts/jobs/{job['id']}", "DELETE")
    assert answer.status == 204
    assert {"delete", "get"} <= listed(answer, "Access-Control-Allow-Methods")
    answer = await preflight(client, "/v1/voices/someone", "DELETE", origin="https://other.example")
    assert answer.status == 204
    assert answer.headers[ALLOW_ORIGIN] == "https://other.example"
    # A method the route does not have, a path with no route: no preflight passes.
    answer = await preflight(client, "/v1/tts/jobs", "PUT")
    assert answer.status == 405
    assert (await answer.json())["error"]["code"] == "method_not_allowed"
    assert "Access-Control-Allow-Methods" not in answer.headers
    assert (await preflight(client, "/v1/nothing-here", "POST")).status == 404


async def test_a_listed_origin_reads_answers_and_errors(make_client: ClientFactory) -> None:
    client = await make_client(allowed_origins=APP)
    page = {"Origin": APP}
    answer = await client.post("/v1/tts/jobs", json={"text": "From the page."}, headers=page)
    assert answer.status == 202
    assert_readable_by(answer, APP)
    job = await answer.json()
    answer = await client.get(job["status_url"], headers=page)
    assert answer.status == 200
    assert_readable_by(answer, APP)
    # Errors carry the headers too, so that the page can read what went wrong.
    for method, path, options, status in [
        ("POST", "/v1/tts/jobs", {"json": {"text": ""}}, 422),
        ("POST", "/v1/tts/jobs", {"data": b"{not json", "headers": {}}, 400),
        ("GET", "/v1/tts/jobs/0123456789abcdef0123456789abcdef", {}, 404),
        ("GET", "/v1/nothing-here", {}, 404),
        ("GET", f"/v1/tts/jobs/{job['id']}/audio", {}, 409),
        ("POST", "/tts/submit", {"json": {"text": ""}}, 422),  # the legacy API
    ]:
        headers = {**options.pop("headers", {}), **page}
        if "data" in options:
            headers["Content-Type"] = "application/json"
        answer = await client.request(method, path, headers=headers, **options)
        assert answer.status == status, (path, await answer.text())
        assert_readable_by(answer, APP)
        body = await answer.json()
        assert body.get("error") or body.get("detail"), body


async def test_a_streamed_answer_carries_the_headers(make_client: ClientFactory) -> None:
    """An SSE stream is under way before its handler returns: its headers are set as it starts."""
    client = await make_client(allowed_origins=APP)
    job = await submit(client, text="Waiting for a worker.")
    async with asyncio.timeout(10):
        answer = await client.get(job["events_url"], headers={"Origin": APP})
        assert answer.status == 200
        assert answer.headers["Content-Type"].startswith("text/event-stream")
        assert_readable_by(answer, APP)
        await answer.content.readline()  # the stream is live
        answer.close()


async def test_keys_are_not_asked_of_a_preflight(make_client: ClientFactory) -> None:
    """A preflight carries no key: it passes where keys are required; the request itself does
    not, and the page can read why."""
    client = await make_client(allowed_origins=APP, api_keys="page-key")
    answer = await preflight(client, "/v1/tts/jobs", "POST", headers="authorization, content-type")
    assert answer.status == 204
    assert "authorization" in listed(answer, "Access-Control-Allow-Headers")
    answer = await client.post("/v1/tts/jobs", json={"text": "Hi."}, headers={"Origin": APP})
    assert answer.status == 401
    assert_readable_by(answer, APP)
    assert "www-authenticate" in listed(answer, "Access-Control-Expose-Headers")
    keyed = {"Origin": APP, "Authorization": "Bearer page-key"}
    answer = await client.post("/v1/tts/jobs", json={"text": "Hi."}, headers=keyed)
    assert answer.status == 202
    assert_readable_by(answer, APP)


async def test_any_origin_never_with_credentials(make_client: ClientFactory) -> None:
    """`*`: any page calls the API, never with the visitor's cookie; a listed origin beside it
    keeps its credentials."""
    client = await make_client(allowed_origins="*")
    answer = await preflight(client, "/v1/tts/jobs", "POST", origin=EVIL)
    assert answer.status == 204
    assert answer.headers[ALLOW_ORIGIN] == "*"
    assert ALLOW_CREDENTIALS not in answer.headers
    mine = await submit(client, text="Mine.")
    token = mine["client_token"]
    answer = await client.get("/v1/tts/jobs", headers={"Origin": EVIL, **cookie(client, token)})
    assert answer.status == 200
    assert answer.headers[ALLOW_ORIGIN] == "*"
    assert ALLOW_CREDENTIALS not in answer.headers  # the browser keeps this answer from the page
    # Such a page sends no cookie, and identifies with the token it was given, in a header.
    client.session.cookie_jar.clear()
    answer = await client.post("/v1/tts/jobs", json={"text": "Page."}, headers={"Origin": EVIL})
    assert answer.status == 202 and answer.headers[ALLOW_ORIGIN] == "*"
    given = answer.headers[TOKEN_HEADER]
    assert TOKEN_HEADER.lower() in listed(answer, "Access-Control-Expose-Headers")
    page = {"Origin": EVIL, TOKEN_HEADER: given}
    jobs = (await (await client.get("/v1/tts/jobs", headers=page)).json())["jobs"]
    assert [j["id"] for j in jobs] == [(await answer.json())["id"]]

    both = await make_client(allowed_origins=f"*, {APP}")
    answer = await preflight(both, "/v1/tts/jobs", "POST")
    assert answer.headers[ALLOW_ORIGIN] == APP and answer.headers[ALLOW_CREDENTIALS] == "true"
    answer = await preflight(both, "/v1/tts/jobs", "POST", origin=EVIL)
    assert answer.headers[ALLOW_ORIGIN] == "*" and ALLOW_CREDENTIALS not in answer.headers


async def test_an_unlisted_origin_is_refused(make_client: ClientFactory) -> None:
    client = await make_client(allowed_origins=APP)
    answer = await preflight(client, "/v1/tts/jobs", "POST", origin=EVIL)
    assert answer.status == 403
    assert_no_cors(answer)
    assert (await answer.json())["error"]["code"] == "origin_not_allowed"
    answer = await client.get("/v1/voices", headers={"Origin": EVIL})
    assert answer.status == 200  # sent, as any GET is; the browser keeps it from the page
    assert_no_cors(answer)
    assert "origin" in listed(answer, "Vary")
    # Its writes are refused as they always were (a form needs no preflight).
    answer = await client.post("/v1/tts/jobs", json={"text": "Theirs."}, headers={"Origin": EVIL})
    assert answer.status == 403
    assert_no_cors(answer)
    # A page's own origin, as a browser sends it on a write, needs no CORS.
    own = f"http://{client.host}:{client.port}"
    answer = await client.post("/v1/tts/jobs", json={"text": "Ours."}, headers={"Origin": own})
    assert answer.status == 202
    assert_no_cors(answer)


async def test_only_the_api_is_shared(make_client: ClientFactory) -> None:
    """The operators' console, the demo page and the probes stay same-origin."""
    client = await make_client(allowed_origins=APP, admin_keys="operator-key")
    for path in ("/admin/session", "/admin/v1/queue", "/", "/healthz"):
        answer = await preflight(client, path, "POST")
        assert answer.status == 405, path
        assert_no_cors(answer)
        answer = await client.get(path, headers={"Origin": APP})
        assert_no_cors(answer)
    answer = await client.get("/openapi.json", headers={"Origin": APP})
    assert answer.status == 200
    assert_readable_by(answer, APP)


async def test_a_preflight_passes_while_redis_is_down(
    make_client: ClientFactory, tmp_path: Path
) -> None:
    """The page reads the 503 of its request rather than a failed preflight."""
    with EmbeddedRedis(tmp_path / "redis") as server:
        client = await make_client(redis_url=server.url, allowed_origins=APP)
        server.stop()
        async with asyncio.timeout(20):
            while not client.app[THROUGHPUT].store_down:
                await asyncio.sleep(0.05)
        assert (await preflight(client, "/v1/tts/jobs", "POST")).status == 204
        answer = await client.post("/v1/tts/jobs", json={"text": "Hi."}, headers={"Origin": APP})
        assert answer.status == 503
        assert_readable_by(answer, APP)


def test_the_headers_clients_use_are_named() -> None:
    assert TOKEN_HEADER in REQUEST_HEADERS and ELEVENLABS_KEY_HEADER in REQUEST_HEADERS
    assert TOKEN_HEADER in RESPONSE_HEADERS
