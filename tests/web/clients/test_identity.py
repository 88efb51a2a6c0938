"""Who a request is: a script that keeps no cookies stays one client by sending back the token
its first answer gave it (`X-Client-Token`), and a token it was not given makes nobody else."""

from __future__ import annotations

from typing import Any

import aiohttp
from aiohttp.test_utils import TestClient

from tests.conftest import ClientFactory, WorkerProcess
from tests.web.conftest import wait_job
from web.clients.identity import COOKIE, TOKEN_HEADER

Client = TestClient[Any, Any]


def cookieless() -> aiohttp.ClientSession:
    """curl without -b/-c: nothing it is sent comes back."""
    return aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar())


async def test_a_script_without_cookies_uses_its_own_jobs(
    make_client: ClientFactory, worker: WorkerProcess
) -> None:
    client = await make_client(callback_allow="127.0.0.1/32")
    url = client.make_url
    async with cookieless() as script:
        text = {"text": "Kept by a script that keeps no cookies.", "voice": "en_male"}
        async with script.post(url("/v1/tts/jobs"), json=text) as response:
            first = await response.json()
            assert response.status == 202
            assert response.headers[TOKEN_HEADER] == first["client_token"]
        mine = {TOKEN_HEADER: first["client_token"]}

        # Its own: listed, answered from its own cache, cancelled, its callback's secret.
        await wait_job(client, first["id"], ("succeeded",))
        async with script.get(url("/v1/tts/jobs"), headers=mine) as response:
            assert [j["id"] for j in (await response.json())["jobs"]] == [first["id"]]
        async with script.post(url("/v1/tts/jobs"), json=text, headers=mine) as response:
            repeat = await response.json()
            assert "client_token" not in repeat and TOKEN_HEADER not in response.headers
        assert (await wait_job(client, repeat["id"], ("succeeded",))).get("cached") is True
        long_text = {"text": "A long one. " * 300, "voice": "en_male"}
        async with script.post(url("/v1/tts/jobs"), json=long_text, headers=mine) as response:
            long_job = (await response.json())["id"]
        async with script.delete(url(f"/v1/tts/jobs/{long_job}"), headers=mine) as response:
            assert response.status in (200, 202), await response.text()
        hooked = {**text, "callback_url": "http://127.0.0.1:9/hook", "cache": False}
        async with script.post(url("/v1/tts/jobs"), json=hooked, headers=mine) as response:
            secret = (await response.json())["callback_secret"]
        async with script.get(url("/v1/callbacks/secret"), headers=mine) as response:
            assert (await response.json())["secret"] == secret

        # With a token the server did not sign (mistyped, cut, forged): refused, saying so,
        # never quietly somebody new who has none of its jobs.
        forged = {TOKEN_HEADER: first["client_token"][:-2] + "xx"}
        for path in ("/v1/tts/jobs", f"/v1/tts/jobs/{first['id']}", "/v1/callbacks/secret"):
            async with script.get(url(path), headers=forged) as response:
                assert response.status == 401, path
                error = (await response.json())["error"]
                assert error["code"] == "invalid_client_token" and error["param"] == TOKEN_HEADER
                # No new identity in its place: the caller fixes its header.
                assert TOKEN_HEADER not in response.headers, path
                assert "Set-Cookie" not in response.headers, path
        # Outside the API (probes, the page's files) the header is not the server's concern.
        async with script.get(url("/healthz"), headers=forged) as response:
            assert response.status == 200
        # An empty header is no header: a new identity, as without one.
        async with script.get(url("/v1/tts/jobs"), headers={TOKEN_HEADER: ""}) as response:
            assert response.status == 200 and (await response.json())["jobs"] == []
        # Without its token it is somebody new.
        headers: dict[str, str] = {}
        async with script.get(url("/v1/tts/jobs"), headers=headers) as response:
            assert (await response.json())["jobs"] == []
        async with script.delete(url(f"/v1/tts/jobs/{first['id']}"), headers=headers) as r:
            assert r.status == 403  # not its job
        async with script.get(url("/v1/callbacks/secret"), headers=headers) as response:
            assert (await response.json())["secret"] != secret
        async with script.post(url("/v1/tts/jobs"), json=text, headers=headers) as response:
            stranger = await response.json()
        assert (await wait_job(client, stranger["id"], ("succeeded",)))["cached"] is False


async def test_a_browser_never_reads_its_cookie_back(client: Client) -> None:
    """The page's identity is an HttpOnly cookie: no answer to a request that carries it hands
    its value to the page's JavaScript."""
    first = await client.get("/")
    cookie = first.cookies[COOKIE].value
    assert first.headers[TOKEN_HEADER] == cookie  # (its very first answer, before any script)
    response = await client.post("/v1/tts/jobs", json={"text": "From the page."})
    body = await response.json()
    assert response.status == 202 and "client_token" not in body
    assert TOKEN_HEADER not in response.headers and cookie not in await response.text()


async def test_an_answer_that_mints_an_identity_is_never_kept_by_a_shared_cache(
    client: Client,
) -> None:
    """A proxy that kept an answer carrying Set-Cookie would hand one identity to everyone
    behind it: every answer that mints one says no-store, the page's and static files' too."""
    for path in ("/", "/static/app.js", "/v1/voices", "/healthz"):
        client.session.cookie_jar.clear()
        response = await client.get(path)
        assert response.status == 200, path
        assert COOKIE in response.cookies and response.headers["Cache-Control"] == "no-store", path
    again = await client.get("/v1/voices")  # with its cookie now: no identity minted
    assert COOKIE not in again.cookies


async def test_redis_never_holds_a_cookie_clients_cookie(
    make_client: ClientFactory, aredis: Any, keys: Any
) -> None:
    """A cookie client's id is derived from its cookie, not the cookie: whoever reads Redis's
    key names or a job's record cannot act as that client."""
    client = await make_client()
    first = await client.get("/healthz")
    cookie = first.cookies[COOKIE].value
    job = await (await client.post("/v1/tts/jobs", json={"text": "Mine."})).json()
    owner = (await aredis.hget(keys.job(job["id"]), "client")).decode()
    assert owner.startswith("c-") and cookie not in owner
    names = [name.decode() async for name in aredis.scan_iter(match=f"{keys.base}:*")]
    assert names and not [name for name in names if cookie.split(".")[0] in name]
    for field in (await aredis.hgetall(keys.job(job["id"]))).values():
        assert cookie.split(".")[0].encode() not in field
    # The same cookie is the same client: its job is its own.
    assert (await client.delete(f"/v1/tts/jobs/{job['id']}")).status == 202


async def test_a_wrong_key_is_told_it_is_wrong_not_missing(make_client: ClientFactory) -> None:
    client = await make_client(api_keys="alpha")
    missing = await (await client.get("/v1/voices")).json()
    assert "send 'Authorization: Bearer <key>'" in missing["error"]["message"]
    wrong = await client.get("/v1/voices", headers={"Authorization": "Bearer alhpa"})
    body = await wrong.json()
    assert wrong.status == 401 and body["error"]["code"] == "invalid_api_key"
    assert "not one of this server's keys" in body["error"]["message"], body
