"""A whole document as one job: kept in parts, resumed after a crash where it stopped (checked
from the engines' own counters), served joined from its parts (or encoded from them into any
format) with ranges, with progress."""

from __future__ import annotations

import asyncio
import io
import itertools
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import orjson
import pytest
import soundfile as sf
from redis.asyncio import Redis

from core.audio.catalog import CATALOG
from core.audio.documents import FILE_PIECE_BYTES
from core.audio.formats import SAMPLE_RATE, SEGMENT_GAP_S
from core.audio.sizes import expected_bytes
from core.infra.settings import Settings
from core.queue.job import SynthesisRequest
from core.queue.keys import PARTS_LINGER_S
from core.queue.store import Queue
from tests.conftest import ClientFactory, WorkerProcess
from tests.support.jobs import wait_terminal

SENTENCES = 240
DOCUMENT = " ".join(
    f"Chapter line {i} carries the story a little further along." for i in range(SENTENCES)
)
GAP = int(SAMPLE_RATE * SEGMENT_GAP_S)


async def heartbeat(aredis: Redis, queue: Queue, name: str) -> dict[str, Any]:
    raw: Any = await aredis.get(queue.keys.worker(name))
    beat: dict[str, Any] = orjson.loads(raw)
    return beat


async def assert_ranges(client: Any, job_id: str, data: bytes, start: int, length: int) -> None:
    """`length` bytes of the file from `start`, and its last bytes, as the whole file holds them."""
    last = start + length - 1
    span = await client.get(
        f"/v1/tts/jobs/{job_id}/audio", headers={"Range": f"bytes={start}-{last}"}
    )
    assert span.status == 206 and await span.read() == data[start : last + 1]
    assert span.headers["Content-Range"] == f"bytes {start}-{last}/{len(data)}"
    tail = await client.get(f"/v1/tts/jobs/{job_id}/audio", headers={"Range": "bytes=-10"})
    assert await tail.read() == data[-10:]


async def test_a_document_killed_halfway_resumes_where_it_stopped(
    settings: Settings,
    aredis: Redis,
    start_worker: Callable[..., WorkerProcess],
    make_client: ClientFactory,
) -> None:
    queue = Queue(aredis, settings)
    first = start_worker("first")
    request = SynthesisRequest(text=DOCUMENT, voice="en_male", cache=False)
    job_id = (await queue.enqueue(request, "reader", document=True)).job_id
    deadline = time.monotonic() + 60
    while True:
        done, total = await aredis.hmget(
            queue.keys.job(job_id), ["segments_done", "segments_total"]
        )
        if total and int(done) >= int(total) // 3:
            break
        assert time.monotonic() < deadline, "the document never got going"
        await asyncio.sleep(0.005)
    first.kill()
    stored = int(await aredis.hget(queue.keys.job(job_id), "segments_done") or 0)
    assert int(total) // 3 <= stored < int(total), stored  # killed on its way, not at the end
    second = start_worker("second")
    events = await wait_terminal(queue, job_id, timeout=120)
    assert events[-1]["type"] == "succeeded"
    await asyncio.sleep(settings.worker.heartbeat_s * 2)
    # The engine of the second worker made only what the first had not stored.
    total = events[-1]["job"]["segments_total"]
    assert (await heartbeat(aredis, queue, second.name))["segments"] == total - stored
    job = await queue.get(job_id)
    assert job is not None and job.attempts == 2 and job.document

    # Progress events carry audio seconds so far and an estimated finish time.
    progress = [e for e in events if e["type"] == "progress"]
    assert progress and all(e["audio_s"] > 0 for e in progress)
    assert progress[-1]["segment"]["index"] == total
    assert all(e["eta"] >= e["ts"] - 1 for e in progress if e.get("eta") is not None)

    # No value grows with the document: its audio is its parts, no whole file stored.
    assert not await aredis.exists(queue.keys.audio(job_id))
    largest: Any = max(
        [len(p) for p in await aredis.lrange(queue.keys.parts(job_id), 0, -1)]  # type: ignore[misc]
    )
    assert job.audio_size and largest * 10 < job.audio_size  # a part is a segment, no more

    # The file, joined from the parts: whole, then a range across parts, then subtitles.
    client = await make_client()
    whole = await client.get(f"/v1/tts/jobs/{job_id}/audio")
    assert whole.status == 200 and whole.headers["Accept-Ranges"] == "bytes"
    data = await whole.read()
    assert len(data) == job.audio_size == int(whole.headers["Content-Length"])
    samples, rate = sf.read(io.BytesIO(data), dtype="int16")
    assert rate == SAMPLE_RATE and samples.size == job.samples_done
    assert abs(samples.size / rate - (job.duration_s or 0)) < 0.001
    await assert_ranges(client, job_id, data, len(data) // 2, 100_000)
    # A segment of a document: its part, as a file of the job's format.
    first_part = await (await client.get(f"/v1/tts/jobs/{job_id}/segments/1")).read()
    first, _ = sf.read(io.BytesIO(first_part), dtype="int16")
    assert np.array_equal(first, samples[: first.size])
    cues = (await (await client.get(f"/v1/tts/jobs/{job_id}/subtitles?format=json")).json())["cues"]
    assert cues[-1]["segment"] == total and cues[-1]["end"] == round(samples.size / rate, 3)
    # Cues tile the audio: back to back within a part, and each part's first one pause after
    # the last one ended, across the resume.
    for before, after in itertools.pairwise(cues):
        gap = GAP / rate if after["segment"] != before["segment"] else 0.0
        assert abs(after["start"] - before["end"] - gap) < 0.002
    resumed = next(c for c in cues if c["segment"] == stored + 1)
    assert DOCUMENT[resumed["from"] : resumed["to"]].startswith("Chapter line")
    # The pause before each part is silence, where the cues say it is.
    boundary = round(resumed["start"] * rate)
    assert np.abs(samples[boundary - GAP + 10 : boundary - 10]).max() == 0


def decoded_seconds(data: bytes) -> float:
    """Seconds of audio a decoder (FFmpeg's) reads from a file."""
    import av

    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.audio[0]
        frames = sum(frame.samples for frame in container.decode(stream))
        return float(frames / stream.codec_context.sample_rate)


async def test_a_document_in_mp3_resumes_and_is_served_with_ranges(
    settings: Settings,
    aredis: Redis,
    start_worker: Callable[..., WorkerProcess],
    make_client: ClientFactory,
) -> None:
    """A compressed document keeps its parts as PCM (it resumes after a crash as any) and its
    file is encoded from them once, at the end, into pieces that serve it whole and in ranges."""
    queue = Queue(aredis, settings)
    first = start_worker("first")
    request = SynthesisRequest(text=DOCUMENT, voice="en_male", format="mp3", cache=False)
    expected = expected_bytes(DOCUMENT, "mp3", document=True)  # its parts and its file
    job_id = (await queue.enqueue(request, "reader", document=True, expected_bytes=expected)).job_id
    deadline = time.monotonic() + 60
    while int(await aredis.hget(queue.keys.job(job_id), "segments_done") or 0) < 40:
        assert time.monotonic() < deadline, "the document never got going"
        await asyncio.sleep(0.005)
    first.kill()
    start_worker("second")
    events = await wait_terminal(queue, job_id, timeout=120)
    assert events[-1]["type"] == "succeeded", events[-1]
    job = await queue.get(job_id)
    assert job is not None and job.attempts == 2 and job.audio_size

    # Its file lies in pieces of equal size (the last shorter); no draft is left behind.
    pieces: Any = await aredis.lrange(queue.keys.pieces(job_id), 0, -1)
    assert len(pieces) > 2 and {len(p) for p in pieces[:-1]} == {FILE_PIECE_BYTES}
    assert sum(len(p) for p in pieces) == job.audio_size
    assert await aredis.keys(f"{queue.keys.pieces(job_id)}:*") == []
    # The file is kept for the job's time; the parts, six times its size, linger a while only,
    # and the client is charged for the file.
    assert await aredis.ttl(queue.keys.pieces(job_id)) > settings.redis.job_ttl_s - 60
    assert 0 < await aredis.ttl(queue.keys.parts(job_id)) <= PARTS_LINGER_S
    charged = await aredis.hget(queue.keys.usage("reader"), job_id)
    assert charged is not None and int(charged) == job.audio_size < expected // 6

    client = await make_client()
    whole = await client.get(f"/v1/tts/jobs/{job_id}/audio")
    assert whole.status == 200 and whole.headers["Content-Type"] == "audio/mpeg"
    data = await whole.read()
    assert len(data) == job.audio_size == int(whole.headers["Content-Length"])
    # One stream from start to end: the job's length, and a sixth of its WAV (64 kbit/s).
    assert abs(decoded_seconds(data) - (job.duration_s or 0)) < 0.2
    assert len(data) * 5 < job.samples_done * 2
    await assert_ranges(client, job_id, data, FILE_PIECE_BYTES - 1000, 10_000)  # two pieces
    # A segment (a part) in the job's format too, as long as the part.
    part: Any = await aredis.lindex(queue.keys.parts(job_id), 4)
    segment = await client.get(f"/v1/tts/jobs/{job_id}/segments/5")
    assert segment.status == 200 and segment.headers["Content-Type"] == "audio/mpeg"
    assert abs(decoded_seconds(await segment.read()) - len(part) / 2 / SAMPLE_RATE) < 0.1
    # Once the parts are gone, a part is asked for in vain, and told where the file is.
    await aredis.delete(queue.keys.parts(job_id))
    gone = await client.get(f"/v1/tts/jobs/{job_id}/segments/6")
    error = (await gone.json())["error"]
    assert gone.status == 404 and error["code"] == "segment_expired"
    assert f"/v1/tts/jobs/{job_id}/audio" in error["message"]
    assert (await client.get(f"/v1/tts/jobs/{job_id}/audio")).status == 200


@pytest.mark.parametrize("fmt", ["opus", "ogg", "flac", "aac"])
async def test_a_document_comes_in_every_format(
    fmt: str,
    settings: Settings,
    aredis: Redis,
    worker: WorkerProcess,
    make_client: ClientFactory,
) -> None:
    queue = Queue(aredis, settings)
    text = " ".join(DOCUMENT.split(". ")[:30])
    request = SynthesisRequest(text=text, voice="en_female", format=fmt, cache=False)
    job_id = (await queue.enqueue(request, "reader", document=True)).job_id
    events = await wait_terminal(queue, job_id, timeout=60)
    assert events[-1]["type"] == "succeeded", events[-1]
    job = await queue.get(job_id)
    assert job is not None
    client = await make_client()
    whole = await client.get(f"/v1/tts/jobs/{job_id}/audio")
    assert whole.headers["Content-Type"].startswith(CATALOG[fmt].mime)
    data = await whole.read()
    assert len(data) == job.audio_size
    assert abs(decoded_seconds(data) - (job.duration_s or 0)) < 0.2
    if fmt == "flac":  # its length in its header, as a whole file's: libsndfile reads it
        assert len(data) > FILE_PIECE_BYTES  # the first piece was written last
        assert sf.info(io.BytesIO(data)).frames == job.samples_done
