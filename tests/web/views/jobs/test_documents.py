"""A whole document as one job: kept in parts, resumed after a crash where it stopped (checked
from the engines' own counters), served joined from its parts with ranges, with progress."""

from __future__ import annotations

import asyncio
import io
import itertools
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import orjson
import soundfile as sf
from redis.asyncio import Redis

from core.audio.formats import SAMPLE_RATE, SEGMENT_GAP_S
from core.infra.settings import Settings
from core.queue.job import SynthesisRequest
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
    middle = len(data) // 2
    part = await client.get(
        f"/v1/tts/jobs/{job_id}/audio", headers={"Range": f"bytes={middle}-{middle + 99_999}"}
    )
    assert part.status == 206 and await part.read() == data[middle : middle + 100_000]
    assert part.headers["Content-Range"] == f"bytes {middle}-{middle + 99_999}/{len(data)}"
    tail = await client.get(f"/v1/tts/jobs/{job_id}/audio", headers={"Range": "bytes=-10"})
    assert await tail.read() == data[-10:]
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
