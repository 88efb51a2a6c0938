"""Cross-site writes and DNS rebinding: what a page on another site can make a browser do here."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient

from core.infra.settings import Settings
from tests.conftest import ClientFactory
from tests.support.voices import recording_form, wav_bytes
from tests.web.conftest import submit
from web.middlewares.origin import host_allowed, is_loopback_name

Client = TestClient[Any, Any]
EVIL = "https://evil.example"


async def test_other_sites_cannot_change_state(client: Client) -> None:
    """Every kind of cross-site write a page can send without asking first is refused."""
    job = await submit(client, text="Mine.", voice="en_male")
    attempts = [
        ("POST", "/v1/tts/jobs", {"json": {"text": "Theirs."}}),
        ("POST", "/tts/submit", {"data": '{"text": "Theirs."}'}),
        ("POST", "/v1/voices", {"data": recording_form("theirs", wav_bytes(2), "Hello.")}),
        ("POST", "/v1/voices", {"data": {"name": "theirs", "transcript": "Hello."}}),
        ("DELETE", f"/v1/tts/jobs/{job['id']}", {}),
        ("DELETE", "/v1/voices/en_male", {}),
        ("POST", "/v1/audio/speech", {"json": {"model": "tts-1", "input": "x", "voice": "alloy"}}),
    ]
    for method, path, options in attempts:
        response = await client.request(method, path, headers={"Origin": EVIL}, **options)
        body = await response.json()
        assert response.status == 403, (path, body)
        if path.startswith("/tts/"):  # the previous design's error shape
            assert "CHATTTS_ALLOWED_ORIGINS" in body["detail"], body
            continue
        assert body["error"]["code"] == "origin_not_allowed", body
        assert "CHATTTS_ALLOWED_ORIGINS" in body["error"]["message"]
    assert (await client.get(f"/v1/tts/jobs/{job['id']}")).status == 200
    assert (await (await client.get(f"/v1/tts/jobs/{job['id']}")).json())["state"] == "queued"


async def test_the_page_itself_and_scripts_still_write(client: Client) -> None:
    own = f"http://{client.host}:{client.port}"
    response = await client.post("/v1/tts/jobs", json={"text": "Page."}, headers={"Origin": own})
    assert response.status == 202
    response = await client.post("/v1/tts/jobs", json={"text": "Script."})  # no Origin: curl
    assert response.status == 202
    # GETs are never refused for their Origin: reading by id is a capability URL.
    job = await response.json()
    assert (await client.get(job["status_url"], headers={"Origin": EVIL})).status == 200


async def test_configured_origins_may_write(make_client: ClientFactory) -> None:
    client = await make_client(allowed_origins="https://app.example.com, https://other.example")
    for origin, status in [("https://app.example.com", 202), (EVIL, 403), ("null", 403)]:
        response = await client.post(
            "/v1/tts/jobs", json={"text": "Hi."}, headers={"Origin": origin}
        )
        assert response.status == status, origin


@pytest.mark.parametrize(
    ("content_type", "status"),
    [
        ("text/plain", 415),
        ("application/x-www-form-urlencoded", 415),
        ("multipart/form-data; boundary=x", 415),
        ("application/json", 200),
        (None, 200),  # old scripts post JSON with no Content-Type
    ],
)
async def test_the_legacy_submit_takes_only_json(
    client: Client, content_type: str | None, status: int
) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    session: aiohttp.ClientSession = client.session
    async with session.post(
        client.make_url("/tts/submit"),
        data=b'{"text": "Legacy."}',
        headers=headers,
        skip_auto_headers=["Content-Type"],
    ) as response:
        assert response.status == status, await response.text()


async def test_a_loopback_server_answers_only_loopback_names(client: Client) -> None:
    """A page that points its own name at 127.0.0.1 cannot read this server as its origin."""
    for host, status in [
        ("evil.example", 421),
        ("evil.example:8000", 421),
        (f"localhost:{client.port}", 200),
        (f"127.0.0.1:{client.port}", 200),
        ("[::1]:8000", 200),
    ]:
        response = await client.get("/v1/voices", headers={"Host": host})
        assert response.status == status, (host, await response.text())
        if status == 421:
            assert (await response.json())["error"]["code"] == "host_not_allowed"
    # Probes and scrapes address the process by its IP: answered for any Host.
    for path in ("/healthz", "/readyz", "/metrics"):
        response = await client.get(path, headers={"Host": "10.1.2.3:8000"})
        assert response.status in (200, 503), (path, response.status)


def test_host_policy() -> None:
    loopback = Settings.of(host="127.0.0.1")
    public = Settings.of(host="0.0.0.0")
    named = Settings.of(host="0.0.0.0", allowed_hosts="tts.example.com")
    assert not host_allowed("tts.example.com", loopback)
    assert host_allowed("localhost:8000", loopback) and host_allowed("127.3.4.5", loopback)
    assert host_allowed("tts.example.com", public) and host_allowed("10.0.0.7:8000", public)
    assert host_allowed("tts.example.com:443", named) and host_allowed("localhost", named)
    assert not host_allowed("evil.example", named)
    assert host_allowed("evil.example", Settings.of(host="127.0.0.1", allowed_hosts="*"))
    assert is_loopback_name("[::1]") and is_loopback_name("app.localhost")
    assert not is_loopback_name("localhost.evil.example")
