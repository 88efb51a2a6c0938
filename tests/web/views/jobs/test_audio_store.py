"""Finished audio in the audio store, through the whole service: a real Redis, a real worker
writing the files, the web tier serving them. Redis keeps references, not bytes."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from redis.asyncio import Redis

from core.infra.settings import Settings
from core.queue.store import Queue
from tests.conftest import ClientFactory, WorkerProcess
from tests.web.conftest import submit, wait_job
from web.appkeys import MEMORY, QUEUE, SETTINGS
from web.replies.sending import PIECE_BYTES
from web.views.jobs.audio import SEGMENT_RESERVE_BYTES


async def test_files_and_cached_results_live_in_the_store_and_serve_as_before(
    settings: Settings,
    aredis: Redis,
    tmp_path: Path,
    make_client: ClientFactory,
    start_worker: Callable[..., WorkerProcess],
) -> None:
    root = tmp_path / "audio"
    store_url = f"file://{root}"
    start_worker(CHATTTS_AUDIO_STORE=store_url)
    client = await make_client(audio_store=store_url)
    queue: Queue = client.app[QUEUE]
    job = await submit(client, text="Kept on disk, not in Redis.", voice="en_male", format="wav")
    done = await wait_job(client, job["id"], ("succeeded",))
    assert not await aredis.exists(queue.keys.audio(job["id"]))  # no bytes in Redis
    ref = (await aredis.hget(queue.keys.job(job["id"]), "audio_ref")).decode()
    on_disk = (root / ref).read_bytes()
    assert on_disk.startswith(b"RIFF") and len(on_disk) == done["audio_size"]

    url = f"/v1/tts/jobs/{job['id']}/audio"
    whole = await client.get(url)
    assert whole.status == 200 and await whole.read() == on_disk
    part = await client.get(url, headers={"Range": "bytes=10-19"})
    assert part.status == 206 and await part.read() == on_disk[10:20]
    again = await client.get(url, headers={"If-None-Match": whole.headers["ETag"]})
    assert again.status == 304

    # The same request again: answered from the cache, with a file of its own.
    repeat = await submit(client, text="Kept on disk, not in Redis.", voice="en_male", format="wav")
    cached = await wait_job(client, repeat["id"], ("succeeded",))
    assert cached.get("cached") is True
    repeat_ref = (await aredis.hget(queue.keys.job(repeat["id"]), "audio_ref")).decode()
    assert repeat_ref != ref and (root / repeat_ref).read_bytes() == on_disk
    assert await (await client.get(f"/v1/tts/jobs/{repeat['id']}/audio")).read() == on_disk

    # The sweeper keeps what jobs and cache entries record, removes what nothing records.
    orphan = root / f"{ref.split('/')[0]}/jobs/{'0' * 32}/lost.wav"
    orphan.parent.mkdir(parents=True)
    orphan.write_bytes(b"written, then its worker died")
    young = orphan.with_name("young.wav")
    young.write_bytes(b"being completed")
    old = time.time() - 3600
    os.utime(orphan, (old, old))
    for path in root.rglob("*.wav"):
        if path != young:
            os.utime(path, (old, old))
    # Stray files (an operator's, another tool's) are not ours: left alone, the sweep goes on.
    strays = [root / ref.split("/")[0] / "notes.txt", root / ref.split("/")[0] / "x" / "y.wav"]
    for stray in strays:
        stray.parent.mkdir(parents=True, exist_ok=True)
        stray.write_bytes(b"not the service's")
        os.utime(stray, (old, old))
    assert await queue.stored.sweep(grace_s=600) == 1
    assert not orphan.exists() and young.exists() and all(s.exists() for s in strays)
    assert (root / ref).exists() and (root / repeat_ref).exists()
    await aredis.delete(queue.keys.job(job["id"]))  # as when the job expires
    assert await queue.stored.sweep(grace_s=600) == 1
    assert not (root / ref).exists() and (root / repeat_ref).exists()


async def test_results_kept_in_redis_stay_readable_once_a_store_is_set(
    settings: Settings, make_client: ClientFactory, worker: WorkerProcess, tmp_path: Path
) -> None:
    """A deployment that turns the store on keeps serving what it made before."""
    before = await make_client()
    job = await submit(before, text="Made before the store.", voice="en_female", format="mp3")
    await wait_job(before, job["id"], ("succeeded",))
    expected = await (await before.get(f"/v1/tts/jobs/{job['id']}/audio")).read()
    after = await make_client(audio_store=f"file://{tmp_path / 'audio'}")
    got = await after.get(f"/v1/tts/jobs/{job['id']}/audio")
    assert got.status == 200 and await got.read() == expected


async def test_a_store_that_refuses_fails_the_job_and_frees_the_worker(
    settings: Settings,
    tmp_path: Path,
    make_client: ClientFactory,
    start_worker: Callable[..., WorkerProcess],
) -> None:
    """Nothing can be written: the job fails with the store's reason within the bound, and the
    worker goes on (its next job fails the same way, it is not wedged)."""
    blocked = tmp_path / "not-a-directory"
    blocked.write_bytes(b"")
    store_url = f"file://{blocked}"
    start_worker(CHATTTS_AUDIO_STORE=store_url, CHATTTS_AUDIO_STORE_TIMEOUT_S="1")
    client = await make_client(audio_store=store_url)
    first = await submit(client, text="Nowhere to go.", voice="en_male")
    second = await submit(client, text="Nowhere either.", voice="en_male")
    for job in (first, second):
        failed = await wait_job(client, job["id"], ("failed", "succeeded"), timeout=30)
        assert failed["state"] == "failed", failed
        assert "audio store" in failed["error"], failed


LONG = "This sentence is one of several that make a long text to speak. " * 8


async def test_segments_and_document_parts_live_in_the_store(
    settings: Settings,
    aredis: Redis,
    tmp_path: Path,
    make_client: ClientFactory,
    start_worker: Callable[..., WorkerProcess],
) -> None:
    root = tmp_path / "audio"
    store_url = f"file://{root}"
    start_worker(CHATTTS_AUDIO_STORE=store_url, CHATTTS_MAX_TEXT_CHARS="600")
    client = await make_client(audio_store=store_url, max_text_chars=600)
    queue: Queue = client.app[QUEUE]

    job = await submit(client, text=LONG, voice="en_male", format="mp3")
    done = await wait_job(client, job["id"], ("succeeded",))
    entries = await aredis.lrange(queue.keys.segments(job["id"]), 0, -1)
    assert len(entries) == done["segments_total"] >= 2
    assert all(len(e) < 200 and (root / e.decode()).is_file() for e in entries)  # keys, not audio
    second = await client.get(f"/v1/tts/jobs/{job['id']}/segments/2")
    assert second.status == 200 and await second.read() == (root / entries[1].decode()).read_bytes()

    document = await submit(client, text=LONG * 2, voice="en_female", format="wav")
    finished = await wait_job(client, document["id"], ("succeeded",), timeout=60)
    parts = await aredis.lrange(queue.keys.parts(document["id"]), 0, -1)
    assert len(parts) >= 2 and all((root / p.decode()).is_file() for p in parts)
    whole = await client.get(f"/v1/tts/jobs/{document['id']}/audio")
    body = await whole.read()
    assert whole.status == 200 and body.startswith(b"RIFF") and len(body) == finished["audio_size"]
    pcm = b"".join((root / p.decode()).read_bytes() for p in parts)
    assert body[44:] == pcm  # the file is its parts, joined as it is sent
    middle = len(body) // 2
    part = await client.get(
        f"/v1/tts/jobs/{document['id']}/audio", headers={"Range": f"bytes={middle}-{middle + 999}"}
    )
    assert part.status == 206 and await part.read() == body[middle : middle + 1000]

    # In a compressed format, the file encoded from the parts lies in the store in pieces.
    document = await submit(client, text=LONG * 2, voice="en_female", format="opus")
    finished = await wait_job(client, document["id"], ("succeeded",), timeout=60)
    pieces = await aredis.lrange(queue.keys.pieces(document["id"]), 0, -1)
    assert pieces and all(len(p) < 200 and (root / p.decode()).is_file() for p in pieces)
    whole = await client.get(f"/v1/tts/jobs/{document['id']}/audio")
    body = await whole.read()
    assert body.startswith(b"OggS") and len(body) == finished["audio_size"]
    assert body == b"".join((root / p.decode()).read_bytes() for p in pieces)
    # Its parts go once their list has (after a while): the sweeper removes their objects.
    parts = await aredis.lrange(queue.keys.parts(document["id"]), 0, -1)
    await aredis.delete(queue.keys.parts(document["id"]))
    await queue.stored.sweep(grace_s=0)
    assert not any((root / p.decode()).exists() for p in parts)
    assert all((root / p.decode()).is_file() for p in pieces)
    assert (await client.get(f"/v1/tts/jobs/{document['id']}/audio")).status == 200


LARGE = "A file larger than a piece of the memory budget, sent a piece at a time. " * 36


@pytest.mark.parametrize("where", ["file", "redis"])
async def test_a_large_file_is_sent_a_piece_at_a_time_not_held_whole(
    settings: Settings,
    tmp_path: Path,
    make_client: ClientFactory,
    start_worker: Callable[..., WorkerProcess],
    where: str,
) -> None:
    """A download holds one piece of the memory budget while it goes out, read from where the
    file is kept: slow readers of large files cannot hold the budget of everyone."""
    store_url = f"file://{tmp_path / 'audio'}" if where == "file" else "redis"
    start_worker(CHATTTS_AUDIO_STORE=store_url)
    client = await make_client(audio_store=store_url, send_rate_per_address_bytes=0)
    job = await submit(client, text=LARGE, voice="en_male", format="wav")
    done = await wait_job(client, job["id"], ("succeeded",), timeout=60)
    size = done["audio_size"]
    assert size > 5 * PIECE_BYTES, size
    url = f"/v1/tts/jobs/{job['id']}/audio"
    whole = await (await client.get(url)).read()
    assert len(whole) == size and whole.startswith(b"RIFF")
    span = await client.get(url, headers={"Range": f"bytes={PIECE_BYTES - 5}-{PIECE_BYTES + 9}"})
    assert span.status == 206 and await span.read() == whole[PIECE_BYTES - 5 : PIECE_BYTES + 10]
    tail = await client.get(url, headers={"Range": "bytes=-7"})
    assert await tail.read() == whole[-7:]
    assert (await client.get(url, headers={"If-None-Match": f'"{job["id"]}"'})).status == 304
    # Three downloads that read nothing: each holds about a piece, not the file.
    memory = client.app[MEMORY]
    stalled = []
    for _ in range(3):
        response = await client.get(url)
        await response.content.readexactly(1024)
        stalled.append(response)
    await asyncio.sleep(0.5)
    assert memory.held <= 3 * PIECE_BYTES < size, (memory.held, size)
    for response in stalled:
        response.close()


async def test_a_segment_is_refused_before_it_is_read_when_its_address_holds_its_budget(
    make_client: ClientFactory, worker: WorkerProcess
) -> None:
    """What a segment may take is reserved before it is read: past the address's budget the
    request is refused without reading anything (a crowd of them once read first)."""
    client = await make_client()
    job = await submit(client, text="One segment to fetch.", voice="en_male", format="wav")
    await wait_job(client, job["id"], ("succeeded",))
    url = f"/v1/tts/jobs/{job['id']}/segments/1"
    assert (await client.get(url)).status == 200
    memory, budget = client.app[MEMORY], client.app[SETTINGS].limits.web_memory_per_address_bytes
    memory.take("127.0.0.1", budget - SEGMENT_RESERVE_BYTES + 1, "a test's download")
    refused = await client.get(url)
    assert refused.status == 429, await refused.text()
    assert (await refused.json())["error"]["code"] == "too_much_in_flight"
    memory.give("127.0.0.1", budget - SEGMENT_RESERVE_BYTES + 1)
    assert (await client.get(url)).status == 200 and memory.held == 0
