"""Who may use the console: admin keys as bearer tokens, the page's signed session, the refusals."""

from __future__ import annotations

from typing import Any

import aiohttp
from aiohttp.test_utils import TestClient

from tests.conftest import ClientFactory
from web.clients.key_guesses import WRONG_KEYS_BURST
from web.clients.operators import SESSION_COOKIE

Client = TestClient[Any, Any]
ADMIN = {"Authorization": "Bearer root-key-1234"}


async def _code(response: aiohttp.ClientResponse) -> tuple[int, str]:
    body = await response.json()
    return response.status, body["error"]["code"] if "error" in body else "ok"


async def test_the_console_is_off_without_admin_keys(make_client: ClientFactory) -> None:
    client = await make_client(admin_keys="")
    response = await client.get("/admin/v1/queue", headers=ADMIN)
    assert await _code(response) == (403, "console_off")
    page = await (await client.get("/admin")).text()
    assert "The console is off" in page and "CHATTTS_ADMIN_KEYS" in page


async def test_only_an_admin_key_opens_the_console(make_client: ClientFactory) -> None:
    client = await make_client(admin_keys="root-key-1234", api_keys="user-key")
    no_key = await client.get("/admin/v1/queue")
    assert await _code(no_key) == (401, "admin_key_required")
    assert no_key.headers["WWW-Authenticate"].startswith("Bearer")
    for key in ("user-key", "root-key-123", "root-key-12345"):  # an API key is not an admin's
        response = await client.get("/admin/v1/queue", headers={"Authorization": f"Bearer {key}"})
        assert await _code(response) == (403, "not_an_admin"), key
    response = await client.post(
        "/admin/v1/queue/pause", headers={"Authorization": "Bearer user-key"}
    )
    assert await _code(response) == (403, "not_an_admin")
    assert (await client.get("/admin/v1/queue", headers=ADMIN)).status == 200


async def test_the_page_signs_in_with_a_session_cookie(make_client: ClientFactory) -> None:
    client = await make_client(admin_keys="root-key-1234")
    assert 'id="sign-in"' in await (await client.get("/admin")).text()
    wrong = await client.post("/admin/session", json={"key": "guess"})
    assert await _code(wrong) == (403, "not_an_admin")
    signed = await client.post("/admin/session", json={"key": "root-key-1234"})
    assert signed.status == 200
    cookie = signed.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/admin" in cookie
    assert "root-key" not in cookie  # the key's hash, never the key
    # The test client keeps the cookie: the page and the API open, and the audit names the key.
    assert "signed in as admin …1234" in await (await client.get("/admin")).text()
    paused = await client.post("/admin/v1/queue/pause", json={"reason": "upgrade"})
    assert paused.status == 200, await paused.text()
    assert (await paused.json())["paused"]["by"] == "admin …1234"
    # A page elsewhere cannot act through the operator's browser.
    cross = await client.post("/admin/v1/queue/resume", headers={"Origin": "https://evil.example"})
    assert await _code(cross) == (403, "origin_not_allowed")
    # A made-up or altered session is nobody's.
    value = cookie.split(";")[0].split("=", 1)[1]
    expires, key_id, signature = value.split(".")
    forged = f"{int(expires) + 10_000}.{key_id}.{signature}"
    async with (
        aiohttp.ClientSession(cookies={SESSION_COOKIE: forged}) as stranger,
        stranger.get(client.make_url("/admin/v1/queue")) as response,
    ):
        assert await _code(response) == (403, "not_an_admin")
    # Signing out ends it.
    assert (await client.delete("/admin/session")).status == 200
    assert (await client.get("/admin/v1/queue")).status == 401
    # ... everywhere: the same cookie, replayed from elsewhere, is refused too.
    async with (
        aiohttp.ClientSession(cookies={SESSION_COOKIE: value}) as replay,
        replay.get(client.make_url("/admin/v1/queue")) as response,
    ):
        assert await _code(response) == (403, "not_an_admin")


async def test_a_session_ends_when_its_key_is_removed(make_client: ClientFactory) -> None:
    first = await make_client(admin_keys="root-key-1234,other-key-9")
    signed = await first.post("/admin/session", json={"key": "root-key-1234"})
    value = signed.headers["Set-Cookie"].split(";")[0].split("=", 1)[1]
    second = await make_client(admin_keys="other-key-9")  # the same secret, the key removed
    async with aiohttp.ClientSession(cookies={SESSION_COOKIE: value}) as browser:
        async with browser.get(second.make_url("/admin/v1/queue")) as response:
            assert await _code(response) == (403, "not_an_admin")
        async with browser.get(first.make_url("/admin/v1/queue")) as response:
            assert response.status == 200


async def test_wrong_keys_from_one_address_are_refused_past_a_burst(
    make_client: ClientFactory,
) -> None:
    """A guesser gets ten tries, then one every ten seconds: past the burst every key from its
    address is refused before it is checked, except the right one (its holder is not the
    guesser); other addresses are untouched."""
    client = await make_client(admin_keys="root-key-1234", api_keys="user-key")
    for n in range(WRONG_KEYS_BURST):
        guess = {"Authorization": f"Bearer guess-{n}"}
        path = "/admin/v1/queue" if n % 2 else "/v1/voices"  # admin and API keys alike
        status, _ = await _code(await client.get(path, headers=guess))
        assert status in (401, 403), n
    refused = await client.post("/admin/session", json={"key": "guess-again"})
    assert await _code(refused) == (429, "rate_limited")
    assert 1 <= int(refused.headers["Retry-After"]) <= 10
    assert "wrong keys from this address" in (await refused.json())["error"]["message"]
    right = await client.get("/admin/v1/queue", headers=ADMIN)
    assert right.status == 200
    again = await client.get("/admin/v1/queue", headers={"Authorization": "Bearer guess-11"})
    assert await _code(again) == (429, "rate_limited")
    # Requests without a key are not its concern.
    assert (await client.get("/healthz")).status == 200
