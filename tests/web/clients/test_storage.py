"""Storage is admitted like work: a job's expected audio is charged to its client at submit, so
that one client inside its rates cannot fill the store for everyone."""

from __future__ import annotations

import asyncio
from pathlib import Path

from redis.asyncio import Redis

from core.audio.sizes import expected_bytes
from core.infra.embedded_redis import EmbeddedRedis
from tests.web.conftest import ClientFactory, cookie

TEXT = "A sentence of a few words to speak, once and again. " * 20  # about 1,040 characters


async def test_a_client_past_its_storage_quota_is_refused_and_others_are_not(
    make_client: ClientFactory,
) -> None:
    each = expected_bytes(TEXT, "wav", document=False)
    client = await make_client(storage_per_client_bytes=int(each * 2.5))
    alice, bob = cookie(client, "a" * 20), cookie(client, "b" * 20)
    accepted = []
    for _ in range(2):
        response = await client.post("/v1/tts/jobs", json={"text": TEXT}, headers=alice)
        assert response.status == 202, await response.json()
        accepted.append((await response.json())["id"])
    refused = await client.post("/v1/tts/jobs", json={"text": TEXT}, headers=alice)
    body = await refused.json()
    assert refused.status == 429 and body["error"]["code"] == "storage_quota", body
    assert "limit per client" in body["error"]["message"]
    assert 1 <= int(refused.headers["Retry-After"]) <= 3600
    # A short job still fits; a job cancelled before it ran gives its charge back, so that a
    # large one fits again; a retry of an accepted one is not charged again; and another client
    # is not touched by the first one's usage.
    short = await client.post("/v1/tts/jobs", json={"text": "Short."}, headers=alice)
    assert short.status == 202
    cancelled = await client.delete(f"/v1/tts/jobs/{accepted[0]}", headers=alice)
    assert cancelled.status == 202 and (await cancelled.json())["state"] == "cancelled"
    fits = await client.post("/v1/tts/jobs", json={"text": TEXT}, headers=alice)
    assert fits.status == 202, await fits.json()
    idem = {**bob, "Idempotency-Key": "same-job"}
    for _ in range(3):
        again = await client.post("/v1/tts/jobs", json={"text": TEXT}, headers=idem)
        assert again.status == 202
    other = await client.post("/v1/tts/jobs", json={"text": TEXT}, headers=bob)
    assert other.status == 202, await other.json()


async def test_fresh_identities_share_their_address_storage_account(
    make_client: ClientFactory,
) -> None:
    """A new cookie per job is a new client, not a new quota: the address's account holds
    them all, and a cancel gives back to both accounts."""
    each = expected_bytes(TEXT, "wav", document=False)
    client = await make_client(storage_per_address_bytes=int(each * 2.5))
    ids = []
    for n in range(2):
        fresh = cookie(client, f"fresh-identity-{n:04d}")
        response = await client.post("/v1/tts/jobs", json={"text": TEXT}, headers=fresh)
        assert response.status == 202, await response.json()
        ids.append((fresh, (await response.json())["id"]))
    refused = await client.post(
        "/v1/tts/jobs", json={"text": TEXT}, headers=cookie(client, "z" * 20)
    )
    body = await refused.json()
    assert refused.status == 429 and body["error"]["code"] == "storage_quota", body
    assert "limit per address" in body["error"]["message"], body
    owner, job_id = ids[0]
    assert (await client.delete(f"/v1/tts/jobs/{job_id}", headers=owner)).status == 202
    fits = await client.post("/v1/tts/jobs", json={"text": TEXT}, headers=cookie(client, "y" * 20))
    assert fits.status == 202, await fits.json()


async def test_a_job_no_client_could_keep_is_a_413_that_says_what_to_do(
    make_client: ClientFactory,
) -> None:
    client = await make_client(storage_per_client_bytes=1_000_000)
    response = await client.post("/v1/tts/jobs", json={"text": TEXT, "format": "wav"})
    body = await response.json()
    assert response.status == 413 and body["error"]["code"] == "job_too_large", body
    assert "shorter jobs" in body["error"]["message"] and body["error"]["param"] == "text"
    smaller = await client.post("/v1/tts/jobs", json={"text": TEXT[:200], "format": "mp3"})
    assert smaller.status == 202


async def test_a_job_larger_than_the_room_left_in_redis_is_refused_at_once(
    make_client: ClientFactory, tmp_path: Path
) -> None:
    """Audio kept in Redis: the room is what its maxmemory leaves, sampled every second."""
    with EmbeddedRedis(tmp_path / "small", maxmemory="8mb") as server:
        client = await make_client(redis_url=server.url, audio_store="redis")
        redis = Redis.from_url(server.url)
        try:
            async with asyncio.timeout(10):
                while True:  # the first sample
                    response = await client.post("/v1/tts/jobs", json={"text": TEXT * 3})
                    if response.status != 202:
                        break
                    await asyncio.sleep(0.2)
            body = await response.json()
            assert response.status == 503 and body["error"]["code"] == "store_full", body
            assert "MB free" in body["error"]["message"] and "maxmemory" in body["error"]["message"]
            assert response.headers["Retry-After"]
            fits = await client.post("/v1/tts/jobs", json={"text": "Short.", "format": "mp3"})
            assert fits.status == 202
        finally:
            await redis.aclose()
