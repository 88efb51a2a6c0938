"""Finished audio in an S3-compatible store, through the whole service: a real S3 server
process, a real Redis, a real worker writing objects, the web tier serving them or redirecting
to them; the store stalled mid-load loses no job."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable
from pathlib import Path

import aiohttp
from redis.asyncio import Redis

from core.infra.settings import Settings
from core.queue.store import Queue
from testing.s3_server import S3Server
from tests.conftest import ClientFactory, WorkerProcess
from tests.web.conftest import submit, wait_job
from web.appkeys import QUEUE

LONG = "This sentence is one of several that make a long text to speak. " * 8


async def test_files_segments_parts_cache_and_sweep_in_a_bucket(
    settings: Settings,
    aredis: Redis,
    s3_store_url: str,
    make_client: ClientFactory,
    start_worker: Callable[..., WorkerProcess],
) -> None:
    start_worker(CHATTTS_AUDIO_STORE=s3_store_url, CHATTTS_MAX_TEXT_CHARS="600")
    client = await make_client(audio_store=s3_store_url, max_text_chars=600)
    queue: Queue = client.app[QUEUE]
    store = queue.stored.store
    assert store is not None

    text = "Kept in a bucket, not in Redis."
    job = await submit(client, text=text, voice="en_male", format="wav")
    done = await wait_job(client, job["id"], ("succeeded",))
    assert not await aredis.exists(queue.keys.audio(job["id"]))  # no bytes in Redis
    ref = (await aredis.hget(queue.keys.job(job["id"]), "audio_ref")).decode()
    stored = await store.get(ref)
    assert stored is not None and stored.startswith(b"RIFF") and len(stored) == done["audio_size"]
    url = f"/v1/tts/jobs/{job['id']}/audio"
    whole = await client.get(url)
    assert whole.status == 200 and await whole.read() == stored
    part = await client.get(url, headers={"Range": "bytes=10-19"})
    assert part.status == 206 and await part.read() == stored[10:20]
    assert (await client.get(url, headers={"If-None-Match": whole.headers["ETag"]})).status == 304
    assert await store.read(ref, 10, 20) == stored[10:30]  # ranged reads, for large files
    assert await store.read(ref, len(stored) - 4, 100) == stored[-4:]
    assert await store.read("absent/jobs/x/y.wav", 0, 10) is None

    repeat = await submit(client, text=text, voice="en_male", format="wav")
    assert (await wait_job(client, repeat["id"], ("succeeded",))).get("cached") is True
    repeat_ref = (await aredis.hget(queue.keys.job(repeat["id"]), "audio_ref")).decode()
    assert repeat_ref != ref and await store.get(repeat_ref) == stored  # a copy of its own

    segmented = await submit(client, text=LONG, voice="en_male", format="mp3")
    finished = await wait_job(client, segmented["id"], ("succeeded",))
    entries = await aredis.lrange(queue.keys.segments(segmented["id"]), 0, -1)
    assert len(entries) == finished["segments_total"] >= 2 and all(len(e) < 200 for e in entries)
    second = await client.get(f"/v1/tts/jobs/{segmented['id']}/segments/2")
    assert second.status == 200 and await second.read() == await store.get(entries[1].decode())

    document = await submit(client, text=LONG * 2, voice="en_female", format="wav")
    made = await wait_job(client, document["id"], ("succeeded",), timeout=60)
    parts = await aredis.lrange(queue.keys.parts(document["id"]), 0, -1)
    pcm = b"".join([await store.get(p.decode()) or b"" for p in parts])
    body = await (await client.get(f"/v1/tts/jobs/{document['id']}/audio")).read()
    assert len(parts) >= 2 and len(body) == made["audio_size"] and body[44:] == pcm

    # The sweeper: what nothing records goes, what jobs and cache entries record stays.
    orphan = f"{ref.split('/')[0]}/jobs/{'0' * 32}/lost.wav"
    await store.put(orphan, b"written, then its worker died")
    assert await queue.stored.sweep(grace_s=0) == 1
    assert await store.get(orphan) is None and await store.get(ref) == stored
    await aredis.delete(queue.keys.job(job["id"]))  # as when the job expires
    assert await queue.stored.sweep(grace_s=0) == 1
    assert await store.get(ref) is None and await store.get(repeat_ref) == stored


async def test_downloads_redirect_to_presigned_urls_when_asked(
    settings: Settings,
    s3_store_url: str,
    make_client: ClientFactory,
    start_worker: Callable[..., WorkerProcess],
) -> None:
    start_worker(CHATTTS_AUDIO_STORE=s3_store_url)
    served = await make_client(audio_store=s3_store_url)
    redirecting = await make_client(audio_store=s3_store_url, audio_store_redirect_s=300)
    text = "Fetched from the bucket itself."
    job = await submit(served, text=text, voice="en_female", format="mp3")
    await wait_job(served, job["id"], ("succeeded",))
    expected = await (await served.get(f"/v1/tts/jobs/{job['id']}/audio")).read()

    answer = await redirecting.get(
        f"/v1/tts/jobs/{job['id']}/audio?download=1", allow_redirects=False
    )
    assert answer.status == 307 and answer.headers["Cache-Control"] == "private, no-store"
    location = answer.headers["Location"]
    assert "X-Amz-Expires=300" in location
    async with aiohttp.ClientSession() as http, http.get(location) as direct:
        assert direct.status == 200 and await direct.read() == expected
        assert direct.headers["Content-Type"] == "audio/mpeg"
        assert direct.headers["Content-Disposition"].startswith("attachment")


async def test_a_stalled_store_loses_no_job_and_reads_answer_503(
    settings: Settings,
    tmp_path: Path,
    make_client: ClientFactory,
    start_worker: Callable[..., WorkerProcess],
) -> None:
    """The store stops answering mid-load (its process frozen): workers retry with their leases
    renewed, reads answer 503, and once it answers again every job succeeds with its audio."""
    server = S3Server(tmp_path / "s3.log").start()
    try:
        await server.create_bucket("stalls")
        url = server.url("stalls")
        start_worker(CHATTTS_AUDIO_STORE=url, CHATTTS_AUDIO_STORE_TIMEOUT_S="60")
        client = await make_client(audio_store=url, audio_store_timeout_s=2)
        first = await submit(client, text="Stored before the stall.", voice="en_male")
        await wait_job(client, first["id"], ("succeeded",))
        assert server.pid is not None
        os.kill(server.pid, signal.SIGSTOP)
        try:
            jobs = [
                await submit(client, text=f"Made during the stall, number {n}.", voice="en_male")
                for n in range(6)
            ]
            await asyncio.sleep(3)  # the worker has synthesized and is retrying its writes
            read = await client.get(f"/v1/tts/jobs/{first['id']}/audio")
            assert read.status == 503
            assert (await read.json())["error"]["code"] == "audio_store_unavailable"
            state = await (await client.get(f"/v1/tts/jobs/{jobs[0]['id']}")).json()
            assert state["state"] in ("queued", "running"), state
        finally:
            os.kill(server.pid, signal.SIGCONT)
        for job in [first, *jobs]:
            done = await wait_job(client, job["id"], ("succeeded", "failed"), timeout=90)
            assert done["state"] == "succeeded", done
            audio = await client.get(f"/v1/tts/jobs/{job['id']}/audio")
            assert audio.status == 200 and (await audio.read()).startswith(b"RIFF")
    finally:
        server.stop()
