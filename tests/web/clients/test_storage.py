"""Storage is admitted like work: a job's expected audio is charged to its client at submit, so
that one client inside its rates cannot fill the store for everyone."""

from __future__ import annotations

import asyncio
from pathlib import Path

from redis.asyncio import Redis

from core.audio.sizes import expected_bytes, stream_bytes
from core.infra.embedded_redis import EmbeddedRedis
from tests.conftest import ClientFactory
from tests.web.conftest import cookie
from web.appkeys import QUEUE, THROUGHPUT

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


async def test_submissions_faster_than_the_sampling_cannot_promise_the_same_room_twice(
    make_client: ClientFactory, tmp_path: Path
) -> None:
    """The room is sampled once a second; what accepted jobs will still write is reserved, so
    that a burst inside one sample is admitted against the room less those reservations."""
    with EmbeddedRedis(tmp_path / "small", maxmemory="16mb") as server:
        client = await make_client(redis_url=server.url, audio_store="redis")
        meter = client.app[THROUGHPUT]
        async with asyncio.timeout(10):
            while meter.free_bytes is None:
                await asyncio.sleep(0.05)
        room = meter.free_bytes
        each = expected_bytes(TEXT, "mp3", document=False)
        assert 3 * each < room < 12 * each, (room, each)  # the burst is larger than the room
        burst = [
            client.post(
                "/v1/tts/jobs",
                json={"text": TEXT, "format": "mp3"},
                headers=cookie(client, f"burst-client-{n:04d}"),
            )
            for n in range(12)
        ]
        answers = await asyncio.gather(*burst)
        accepted = [r for r in answers if r.status == 202]
        refused = [await r.json() for r in answers if r.status == 503]
        assert len(accepted) + len(refused) == 12
        assert len(accepted) * each <= room < (len(accepted) + 1) * each, (len(accepted), room)
        assert refused and all(b["error"]["code"] == "store_full" for b in refused), refused
        assert "once the jobs accepted before are written" in refused[0]["error"]["message"]


async def test_numbers_and_slow_speech_are_charged_as_spoken(make_client: ClientFactory) -> None:
    """ "$999,999,999" is nine hundred and ninety-nine million...: charged as the words it
    becomes, at the speed asked for."""
    text = "$999,999,999 " * 100
    plain = expected_bytes("a" * len(text), "wav", document=False)
    spoken = expected_bytes(text, "wav", document=False)
    slow = expected_bytes(text, "wav", document=False, speed=0.5)
    assert spoken > 5 * plain and slow == 2 * spoken
    client = await make_client(storage_per_client_bytes=int(slow * 1.5))
    alice = cookie(client, "n" * 20)
    first = await client.post("/v1/tts/jobs", json={"text": text, "speed": 0.5}, headers=alice)
    assert first.status == 202, await first.json()
    second = await client.post("/v1/tts/jobs", json={"text": text, "speed": 0.5}, headers=alice)
    body = await second.json()
    assert second.status == 429 and body["error"]["code"] == "storage_quota", body


async def test_a_streams_chunks_are_admitted_against_the_redis_budget_for_streams(
    make_client: ClientFactory,
) -> None:
    """Chunks live in Redis: a streamed job is charged its PCM there, at most half of the
    budget per client and per address; a job that does not stream is not charged."""
    each = stream_bytes(TEXT.strip())  # the text as the job holds it
    client = await make_client(stream_chunk_bytes=int(each * 2.5))
    alice, bob = cookie(client, "s" * 20), cookie(client, "t" * 20)
    first = await client.post("/v1/tts/jobs", json={"text": TEXT, "stream": True}, headers=alice)
    assert first.status == 202, await first.json()
    again = await client.post("/v1/tts/jobs", json={"text": TEXT, "stream": True}, headers=alice)
    body = await again.json()
    assert again.status == 429 and body["error"]["code"] == "streams_full", body
    assert "your streams" in body["error"]["message"]
    assert 1 <= int(again.headers["Retry-After"]) <= 3600
    # Another cookie of the same address shares the address's half.
    other = await client.post("/v1/tts/jobs", json={"text": TEXT, "stream": True}, headers=bob)
    body = await other.json()
    assert other.status == 429 and "your address" in body["error"]["message"], body
    whole = await client.post("/v1/tts/jobs", json={"text": TEXT}, headers=bob)
    assert whole.status == 202, await whole.json()
    # The queue's account names the job, with its bytes, until its chunks lapse.
    queue = client.app[QUEUE]
    job_id = (await first.json())["id"]
    async with Redis.from_url(queue.settings.redis.redis_url or "") as redis:
        assert int(await redis.hget(queue.keys.chunk_usage, job_id)) == each
