"""Jobs and voices have owners: reading by id stays open, ending or deleting is the owner's."""

from __future__ import annotations

from typing import Any

import aiohttp
from aiohttp.test_utils import TestClient

from tests.conftest import ClientFactory
from tests.support.voices import EMBEDDING
from tests.web.conftest import submit

Client = TestClient[Any, Any]


async def test_only_the_owner_cancels_a_job(client: Client) -> None:
    job = await submit(client, text="Mine to cancel.", voice="en_male")
    url = client.make_url(f"/v1/tts/jobs/{job['id']}")
    async with aiohttp.ClientSession() as stranger:  # no cookie: another client
        async with stranger.get(url) as response:
            assert response.status == 200  # the id is a capability to read
        async with stranger.delete(url) as response:
            body = await response.json()
            assert response.status == 403 and body["error"]["code"] == "not_job_owner", body
        async with stranger.ws_connect(client.make_url("/v1/ws")) as ws:
            await ws.send_json({"op": "cancel", "job_id": job["id"], "ref": 1})
            frame = await ws.receive_json(timeout=5)
            assert frame["type"] == "error" and frame["error"]["code"] == "not_job_owner", frame
    assert (await (await client.get(f"/v1/tts/jobs/{job['id']}")).json())["state"] == "queued"
    response = await client.delete(f"/v1/tts/jobs/{job['id']}")
    assert response.status == 202 and (await response.json())["state"] == "cancelled"


async def test_with_api_keys_each_key_owns_its_jobs(make_client: ClientFactory) -> None:
    client = await make_client(api_keys="alpha, beta")
    alpha, beta = ({"Authorization": f"Bearer {k}"} for k in ("alpha", "beta"))
    response = await client.post("/v1/tts/jobs", json={"text": "Alpha's."}, headers=alpha)
    job = await response.json()
    response = await client.delete(f"/v1/tts/jobs/{job['id']}", headers=beta)
    assert response.status == 403, await response.text()
    response = await client.delete(f"/v1/tts/jobs/{job['id']}", headers=alpha)
    assert response.status == 202


async def test_only_the_owner_deletes_a_voice(client: Client) -> None:
    response = await client.post("/v1/voices", json={"name": "owned", "embedding": EMBEDDING})
    assert response.status == 201, await response.text()
    assert "owner" not in await response.json()
    assert "owner" not in await (await client.get("/v1/voices/owned")).json()
    async with (
        aiohttp.ClientSession() as stranger,
        stranger.delete(client.make_url("/v1/voices/owned")) as response,
    ):
        body = await response.json()
        assert response.status == 403 and body["error"]["code"] == "not_voice_owner", body
    assert (await client.get("/v1/voices/owned")).status == 200
    assert (await client.delete("/v1/voices/owned")).status == 200
    assert (await client.get("/v1/voices/owned")).status == 404


async def test_a_job_cancelled_before_it_ran_expires_soon(
    make_client: ClientFactory, aredis: Any, keys: Any
) -> None:
    """Submit-then-cancel never reaches a worker: its record goes in minutes, not a day."""
    client = await make_client(unstarted_ttl_s=30, job_ttl_s=86_400)
    answer = await client.post(
        "/v1/tts/jobs", json={"text": "Never mind."}, headers={"Idempotency-Key": "once-only"}
    )
    job = await answer.json()
    owner = (await aredis.hget(keys.job(job["id"]), "client")).decode()
    assert (await client.delete(f"/v1/tts/jobs/{job['id']}")).status == 202
    assert 0 < await aredis.ttl(keys.job(job["id"])) <= 30
    assert 0 < await aredis.ttl(keys.job_events(job["id"])) <= 30
    # Nothing else it made outlives it by a day: its client's events (only this job's), its
    # idempotency key, its storage account (emptied).
    assert 0 < await aredis.ttl(keys.client_events(owner)) <= 30
    assert 0 < await aredis.ttl(keys.idem(owner, "once-only")) <= 30
    assert not await aredis.exists(keys.usage(owner), keys.usage_expiry(owner))
    # A client with other work keeps its events for the day.
    busy = await submit(client, text="Keep me.")
    other = await submit(client, text="Cancel me.")
    assert (await client.delete(f"/v1/tts/jobs/{other['id']}")).status == 202
    assert await aredis.ttl(keys.client_events(owner)) > 30 and busy["state"] == "queued"


async def test_each_client_lists_its_own_voices(client: Client) -> None:
    assert (
        await client.post("/v1/voices", json={"name": "mine", "embedding": EMBEDDING})
    ).status == 201
    names = [v["name"] for v in (await (await client.get("/v1/voices")).json())["voices"]]
    assert "mine" in names and "zh_female" in names
    async with (
        aiohttp.ClientSession() as stranger,
        stranger.get(client.make_url("/v1/voices")) as response,
    ):
        theirs = [v["name"] for v in (await response.json())["voices"]]
    assert "mine" not in theirs and "zh_female" in theirs


async def test_an_admin_key_ends_and_sees_anything(make_client: ClientFactory) -> None:
    client = await make_client(api_keys="alice-key, bob-key", admin_keys="ops-key")
    alice, bob, ops = (
        {"Authorization": f"Bearer {k}"} for k in ("alice-key", "bob-key", "ops-key")
    )
    job = await (await client.post("/v1/tts/jobs", json={"text": "A."}, headers=alice)).json()
    voice = {"name": "alices", "embedding": EMBEDDING}
    assert (await client.post("/v1/voices", json=voice, headers=alice)).status == 201
    assert (await client.delete(f"/v1/tts/jobs/{job['id']}", headers=bob)).status == 403
    listed = await (await client.get("/v1/voices", headers=bob)).json()
    assert "alices" not in [v["name"] for v in listed["voices"]]
    listed = await (await client.get("/v1/voices", headers=ops)).json()
    assert "alices" in [v["name"] for v in listed["voices"]]
    assert (await client.delete(f"/v1/tts/jobs/{job['id']}", headers=ops)).status == 202
    assert (await client.delete("/v1/voices/alices", headers=ops)).status == 200


async def test_only_the_owner_speaks_with_a_voice_and_errors_name_only_its_own(
    client: Client,
) -> None:
    """Another client's voice is unknown to a stranger: not usable, and not named in the
    error's list of voices (which would tell every client what everyone registered)."""
    response = await client.post("/v1/voices", json={"name": "private-one", "embedding": EMBEDDING})
    assert response.status == 201, await response.text()
    assert (
        await client.post("/v1/tts/jobs", json={"text": "Mine.", "voice": "private-one"})
    ).status == 202
    for path, body in (
        ("/v1/tts/jobs", {"text": "Not mine.", "voice": "private-one"}),
        ("/v1/tts/jobs", {"text": "Not mine.", "voice": "no-such-voice"}),
        ("/v1/audio/speech", {"model": "tts-1", "input": "Not mine.", "voice": "private-one"}),
    ):
        async with (
            aiohttp.ClientSession() as stranger,
            stranger.post(client.make_url(path), json=body) as answer,
        ):
            error = (await answer.json())["error"]
            assert answer.status in (400, 422) and error["code"] == "unknown_voice", error
            assert "private-one" not in error["message"].split(";", 1)[1], error
            assert "zh_female" in error["message"], error
    mine = await client.post("/v1/tts/jobs", json={"text": "Mine.", "voice": "nope"})
    assert "private-one" in (await mine.json())["error"]["message"]  # its own, listed


async def test_an_ipv6_sites_64s_are_one_owner(make_client: ClientFactory) -> None:
    """A /48 holds 65,536 /64s: they share one owner's shares (here its share of the backlog),
    where an address elsewhere is still taken."""
    client = await make_client(trusted_proxies="127.0.0.0/8", max_backlog_per_owner=2)
    body = {"text": "From one site.", "voice": "en_female"}
    for n in (1, 2):
        headers = {"X-Forwarded-For": f"2001:db8:7:{n}::5"}
        response = await client.post("/v1/tts/jobs", json=body, headers=headers)
        assert response.status == 202, await response.text()
    headers = {"X-Forwarded-For": "2001:db8:7:3::5"}
    refused = await client.post("/v1/tts/jobs", json=body, headers=headers)
    assert refused.status == 429 and (await refused.json())["error"]["code"] == "backlog_share"
    headers = {"X-Forwarded-For": "2001:db8:8:1::5"}
    assert (await client.post("/v1/tts/jobs", json=body, headers=headers)).status == 202
