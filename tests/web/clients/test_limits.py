"""Rate limits and caps per client and per address, held in Redis across web replicas."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
from aiohttp.test_utils import TestClient

from core.queue.voices import QUEUE_ACCOUNT
from tests.conftest import ClientFactory
from tests.support.voices import EMBEDDING
from tests.web.conftest import cookie

Client = TestClient[Any, Any]


async def _refusal(response: aiohttp.ClientResponse) -> dict[str, Any]:
    body: dict[str, Any] = await response.json()
    assert response.status == 429, body
    assert int(response.headers["Retry-After"]) >= 1
    assert body["error"]["code"] == "rate_limited", body
    return body["error"]


async def test_submissions_per_client(make_client: ClientFactory) -> None:
    client = await make_client(submit_rate_per_client=0.5, submit_burst_per_client=3)
    for i in range(3):
        assert (await client.post("/v1/tts/jobs", json={"text": f"t{i}"})).status == 202
    error = await _refusal(await client.post("/v1/tts/jobs", json={"text": "one more"}))
    assert error["limit"] == "submissions from this client"
    assert "0.5 per second" in error["message"]
    # Every API counts: legacy, OpenAI's, the WebSocket's submit.
    assert (await client.post("/tts/submit", json={"text": "x"})).status == 429
    speech = {"model": "tts-1", "input": "x", "voice": "alloy"}
    assert (await client.post("/v1/audio/speech", json=speech)).status == 429
    async with client.ws_connect("/v1/ws") as ws:
        await ws.send_json({"op": "submit", "ref": 1, "request": {"text": "x"}})
        frame = await ws.receive_json(timeout=5)
        assert frame["type"] == "error" and frame["error"]["code"] == "rate_limited", frame
    # Another client is not held back.
    async with (
        aiohttp.ClientSession() as another,
        another.post(client.make_url("/v1/tts/jobs"), json={"text": "x"}) as other,
    ):
        assert other.status == 202


async def test_submissions_per_address(make_client: ClientFactory) -> None:
    """Dropping the cookie mints a new client, not a new budget."""
    client = await make_client(submit_rate_per_address=0.5, submit_burst_per_address=2)
    statuses = []
    for _ in range(3):
        async with (
            aiohttp.ClientSession() as fresh,  # a new identity each time
            fresh.post(client.make_url("/v1/tts/jobs"), json={"text": "x"}) as r,
        ):
            statuses.append(r.status)
            if r.status == 429:
                assert (await _refusal(r))["limit"] == "submissions from this address"
    assert statuses == [202, 202, 429]


async def test_open_streams_per_client_across_replicas(make_client: ClientFactory) -> None:
    """Two web processes of one deployment (one Redis) share the count."""
    first = await make_client(streams_per_client=2)
    second = await make_client(streams_per_client=2)
    me = cookie(first, "stream-reader-01")
    one = await first.get("/v1/events", headers=me)
    two = await second.get("/v1/events", headers=me)
    assert one.status == two.status == 200
    third = await first.get("/v1/events", headers=me)
    error = await _refusal(third)
    assert error["limit"].startswith("connections waiting at once for this client")
    refused_ws = await second.get("/v1/ws", headers=me)  # the WebSocket counts too
    assert refused_ws.status == 429
    one.close()
    async with asyncio.timeout(10):
        while (again := await second.get("/v1/events", headers=me)).status != 200:
            again.close()
            await asyncio.sleep(0.1)
    again.close()
    two.close()


async def test_subscriptions_per_socket(make_client: ClientFactory) -> None:
    client = await make_client(ws_subscriptions=2)
    async with client.ws_connect("/v1/ws") as ws:
        for i in range(3):
            await ws.send_json({"op": "submit", "ref": i, "request": {"text": f"s{i}"}})
        frames = []
        while not any(f["type"] == "error" for f in frames):
            frames.append(await ws.receive_json(timeout=5))
        errors = [f for f in frames if f["type"] == "error"]
        assert len(errors) == 1 and errors[0]["error"]["code"] == "too_many_subscriptions"


async def test_voices_per_owner(make_client: ClientFactory) -> None:
    client = await make_client(voices_per_owner=2)
    for name in ("one", "two"):
        response = await client.post("/v1/voices", json={"name": name, "embedding": EMBEDDING})
        assert response.status == 201, await response.text()
    response = await client.post("/v1/voices", json={"name": "three", "embedding": EMBEDDING})
    error = await _refusal(response)
    assert error["limit"] == "voices registered by this client"
    assert (await client.delete("/v1/voices/one")).status == 200
    response = await client.post("/v1/voices", json={"name": "three", "embedding": EMBEDDING})
    assert response.status == 201


async def test_concurrent_registrations_cannot_pass_the_voice_quota_together(
    make_client: ClientFactory,
) -> None:
    """The quota is checked and charged in one step: 30 registrations at once, 5 pass."""
    client = await make_client(voices_per_owner=5, voices_per_address=100)
    await client.get("/healthz")  # one identity for all of them
    answers = await asyncio.gather(
        *(
            client.post("/v1/voices", json={"name": f"at-once-{n}", "embedding": EMBEDDING})
            for n in range(30)
        )
    )
    statuses = sorted(a.status for a in answers)
    assert statuses == [201] * 5 + [429] * 25, statuses
    listed = await (await client.get("/v1/voices")).json()
    assert sum(not v["builtin"] for v in listed["voices"]) == 5


async def test_fresh_identities_share_their_address_voice_quota(
    make_client: ClientFactory,
) -> None:
    """Each request without a cookie is a new owner; the address's quota holds them all."""
    client = await make_client(voices_per_address=3)
    url = client.make_url("/v1/voices")
    for n in range(3):
        async with aiohttp.ClientSession() as fresh:
            answer = await fresh.post(url, json={"name": f"fresh-{n}", "embedding": EMBEDDING})
            assert answer.status == 201, await answer.text()
            owner = {"Cookie": "; ".join(f"{k}={m.value}" for k, m in answer.cookies.items())}
    async with aiohttp.ClientSession() as fresh:
        answer = await fresh.post(url, json={"name": "fresh-3", "embedding": EMBEDDING})
        assert (await _refusal(answer))["limit"] == "voices registered from this address"
    async with aiohttp.ClientSession(headers=owner) as last_owner:
        assert (await last_owner.delete(client.make_url("/v1/voices/fresh-2"))).status == 200
        answer = await last_owner.post(url, json={"name": "fresh-3", "embedding": EMBEDDING})
        assert answer.status == 201, await answer.text()


async def test_voice_bytes_per_owner(make_client: ClientFactory) -> None:
    client = await make_client(voice_bytes_per_owner=len(EMBEDDING) * 4)
    assert (
        await client.post("/v1/voices", json={"name": "big", "embedding": EMBEDDING})
    ).status == 201
    response = await client.post("/v1/voices", json={"name": "bigger", "embedding": EMBEDDING})
    assert (await _refusal(response))["limit"] == "bytes of voice data registered by this client"


async def test_fresh_identities_share_their_address_voice_bytes(
    make_client: ClientFactory,
) -> None:
    client = await make_client(voice_bytes_per_address=len(EMBEDDING) * 4)
    url = client.make_url("/v1/voices")
    async with aiohttp.ClientSession() as fresh:
        answer = await fresh.post(url, json={"name": "first", "embedding": EMBEDDING})
        assert answer.status == 201, await answer.text()
    async with aiohttp.ClientSession() as fresh:  # a new owner, the same address
        answer = await fresh.post(url, json={"name": "second", "embedding": EMBEDDING})
        error = await _refusal(answer)
        assert error["limit"] == "bytes of voice data registered from this address"


async def test_a_refused_request_is_charged_to_no_bucket(make_client: ClientFactory) -> None:
    """Refused for its address, a request leaves its client's budget untouched."""
    client = await make_client(
        submit_rate_per_client=0.1,  # one token, and the next in 10 s
        submit_burst_per_client=1,
        submit_rate_per_address=0.5,
        submit_burst_per_address=3,
    )
    async with aiohttp.ClientSession() as other:  # another client, same address
        url = client.make_url("/v1/tts/jobs")
        for _ in range(3):
            async with other.post(url, json={"text": "x"}) as response:
                assert response.status == 202  # the address's 3 are used up here
    refused = await client.post("/v1/tts/jobs", json={"text": "mine"})
    assert (await _refusal(refused))["limit"] == "submissions from this address"
    # The address's budget comes back (2 s per token); this client's one token was never taken.
    await asyncio.sleep(2.1)
    assert (await client.post("/v1/tts/jobs", json={"text": "mine"})).status == 202


async def test_the_64s_of_one_ipv6_site_share_a_bucket_of_four_addresses(
    make_client: ClientFactory,
) -> None:
    """Each /64 is an address to the limits; a /48 (one site: 65,536 of them) shares a bucket
    of four addresses' rate as well, so minting /64s buys four addresses' worth, no more."""
    client = await make_client(
        trusted_proxies="127.0.0.1/32",
        submit_rate_per_address=0.01,  # a burst, then one a hundred seconds
        submit_burst_per_address=2,
        submit_rate_per_client=0,
    )
    statuses = []
    for host in range(6):  # six /64s of 2001:db8:7::/48, two submissions each
        for _ in range(2):
            forwarded = {"X-Forwarded-For": f"2001:db8:7:{host:x}::1"}
            response = await client.post("/v1/tts/jobs", json={"text": "Hi."}, headers=forwarded)
            statuses.append(response.status)
            if response.status == 429:
                body = await response.json()
                assert body["error"]["limit"] == "submissions from this network", body
    assert statuses == [202] * 8 + [429] * 4, statuses
    other = {"X-Forwarded-For": "2001:db8:8::1"}  # another site
    assert (await client.post("/v1/tts/jobs", json={"text": "Hi."}, headers=other)).status == 202


async def test_voices_have_a_byte_budget_on_the_whole_service(
    make_client: ClientFactory, aredis: Any, keys: Any
) -> None:
    """Voices live in Redis: past CHATTTS_VOICE_BYTES_TOTAL no one registers more, however
    many addresses they come from; a deleted voice gives its bytes back."""
    probe = await make_client()
    answer = await probe.post("/v1/voices", json={"name": "voice-0", "embedding": EMBEDDING})
    assert answer.status == 201, await answer.text()
    size = int(await aredis.hget(keys.owned_voices(QUEUE_ACCOUNT), "voice-0"))
    assert (await probe.delete("/v1/voices/voice-0")).status == 200
    client = await make_client(voice_bytes_total=int(size * 2.5))  # two fit, not three
    for name in ("voice-1", "voice-2"):
        answer = await client.post("/v1/voices", json={"name": name, "embedding": EMBEDDING})
        assert answer.status == 201, await answer.text()
    refused = await client.post("/v1/voices", json={"name": "voice-3", "embedding": EMBEDDING})
    assert (await _refusal(refused))["limit"] == "bytes of voice data registered on this service"
    assert (await client.delete("/v1/voices/voice-1")).status == 200
    again = await client.post("/v1/voices", json={"name": "voice-3", "embedding": EMBEDDING})
    assert again.status == 201, await again.text()
