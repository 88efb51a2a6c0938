"""A streaming job's audio in chunks while it is synthesized: the queue contract, through a real
worker (eSpeak NG, whose segments go out whole, one chunk each)."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
from redis.asyncio import Redis

from core.audio.formats import SAMPLE_RATE, SEGMENT_GAP_S
from core.audio.sizes import expected_bytes, stream_bytes
from core.infra.settings import Settings
from core.queue.job import SynthesisRequest
from core.queue.keys import CHUNKS_LINGER_S
from core.queue.results import Room
from core.queue.store import Queue
from tests.conftest import WorkerProcess
from tests.support.jobs import wait_terminal

TEXT = "The first sentence of several. " * 12 + "And one that ends it all."


def pcm(data: bytes) -> np.ndarray:
    return np.frombuffer(data, "<i2")


async def test_chunks_join_into_the_final_file_with_the_pauses_between_segments(
    settings: Settings, aredis: Redis, worker: WorkerProcess
) -> None:
    queue = Queue(aredis, settings)
    request = SynthesisRequest(text=TEXT, voice="en_male", format="pcm", stream=True, cache=False)
    submitted = await queue.enqueue(request, client="c-stream")
    events = await wait_terminal(queue, submitted.job_id)
    assert events[-1]["type"] == "succeeded", events[-1]
    audio_events = [e for e in events if e["type"] == "audio"]
    total = events[-1]["job"]["segments_total"]
    assert total > 1 and len(audio_events) >= total
    # In order, numbered across the job, each naming its segment; all before the end.
    assert [e["chunk"]["index"] for e in audio_events] == list(range(1, len(audio_events) + 1))
    assert [e["chunk"]["segment"] for e in audio_events] == sorted(
        e["chunk"]["segment"] for e in audio_events
    )
    assert events[-1]["job"]["chunks_done"] == len(audio_events)
    chunks = await queue.stored.chunks(submitted.job_id, 0, -1)
    assert len(chunks) == len(audio_events)
    for event, chunk in zip(audio_events, chunks, strict=True):
        assert abs(event["chunk"]["duration_s"] - len(chunk) / 2 / SAMPLE_RATE) < 1e-6
    final = await queue.stored.file(submitted.job_id)
    assert final is not None
    np.testing.assert_array_equal(pcm(b"".join(chunks)), pcm(final))
    # Every later segment's first chunk opens with the pause between segments.
    gap = int(SAMPLE_RATE * SEGMENT_GAP_S)
    firsts = {}
    for event, chunk in zip(audio_events, chunks, strict=True):
        firsts.setdefault(event["chunk"]["segment"], chunk)
    for segment, chunk in firsts.items():
        lead = pcm(chunk)[:gap]
        assert (not lead.any()) == (segment > 1), segment


async def test_only_jobs_that_ask_stream_and_a_clients_stream_carries_no_audio(
    settings: Settings, aredis: Redis, worker: WorkerProcess
) -> None:
    queue = Queue(aredis, settings)
    streamed = await queue.enqueue(
        SynthesisRequest(text=TEXT, voice="en_male", stream=True, cache=False), client="c-mixed"
    )
    plain = await queue.enqueue(SynthesisRequest(text=TEXT, voice="en_male"), client="c-mixed")
    for job in (streamed, plain):
        await wait_terminal(queue, job.job_id)
    plain_events = await wait_terminal(queue, plain.job_id)
    assert not [e for e in plain_events if e["type"] == "audio"]
    assert await queue.stored.chunks(plain.job_id, 0, -1) == []
    client_events = [
        e for _, e in await queue.events.after(queue.keys.client_events("c-mixed"), None, 10_000)
    ]
    assert client_events and not [e for e in client_events if e["type"] == "audio"]


async def test_a_stream_that_outgrows_its_charge_past_the_budget_fails_with_the_reason(
    settings: Settings, aredis: Redis, start_worker: Callable[..., WorkerProcess]
) -> None:
    """A stream is charged its estimate at submission; past it its chunks are charged as they
    come, and once the streams' budget is spent the job stops, failed, saying why (ChatTTS can
    speak longer than any estimate)."""
    queue = Queue(aredis, settings)
    request = SynthesisRequest(text=TEXT, voice="en_male", format="pcm", stream=True, cache=False)
    submitted = await queue.enqueue(request, "c-over", room=Room(chunk_budget=10**9))
    charge = int(await aredis.hget(queue.keys.job(submitted.job_id), "chunk_charge"))
    assert charge == stream_bytes(TEXT)
    # An underestimate: one byte, on the job and its accounts (the queue's and its client's).
    await aredis.hset(queue.keys.job(submitted.job_id), "chunk_charge", 1)
    for account in (queue.keys.chunk_usage, queue.keys.owner_chunk_usage("c-over")):
        await aredis.hset(account, mapping={submitted.job_id: 1, "total": 1})
    start_worker(CHATTTS_STREAM_CHUNK_BYTES="2000000")  # half of it per client: 21 s of PCM
    events = await wait_terminal(queue, submitted.job_id)
    assert events[-1]["type"] == "failed", events[-1]
    assert "CHATTTS_STREAM_CHUNK_BYTES" in events[-1]["job"]["error"]
    kept = b"".join(await queue.stored.chunks(submitted.job_id, 0, -1))
    assert 0 < len(kept) <= 1_000_000
    # Its charge lapses with the chunks' linger: the queue's account holds it meanwhile.
    exp = float(await aredis.zscore(queue.keys.chunk_usage_expiry, submitted.job_id))
    assert exp > time.time() + CHUNKS_LINGER_S - 60


async def test_a_finished_jobs_storage_charge_is_corrected_to_what_it_keeps(
    settings: Settings, aredis: Redis, worker: WorkerProcess
) -> None:
    queue = Queue(aredis, settings)
    request = SynthesisRequest(text="$999,999,999 " * 20, voice="en_male", speed=0.5, cache=False)
    charged = expected_bytes(request.text.strip(), "wav", document=False, speed=0.5)
    submitted = await queue.enqueue(request, "c-charge", expected_bytes=charged)
    usage = queue.keys.usage("c-charge")
    assert int(await aredis.hget(usage, submitted.job_id)) == charged
    assert int(await aredis.get(queue.keys.pending)) == charged  # reserved until written
    events = await wait_terminal(queue, submitted.job_id, timeout=60)
    assert events[-1]["type"] == "succeeded", events[-1]
    size = events[-1]["job"]["audio_size"]
    assert 0 < 2 * size <= charged  # the estimate erred long, as it must
    assert int(await aredis.hget(usage, submitted.job_id)) == 2 * size
    assert int(await aredis.hget(usage, "total")) == 2 * size
    assert int(await aredis.get(queue.keys.pending)) == 0
