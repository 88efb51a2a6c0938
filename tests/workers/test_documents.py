"""A finished document's file encoded from its parts (workers/documents.py), against real Redis:
pieces of equal size in the attempt's draft, a FLAC's length in its header, a missing part
refused."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest
import soundfile as sf
from redis.asyncio import Redis

from core.audio.documents import FILE_PIECE_BYTES
from core.audio.formats import SAMPLE_RATE
from core.audio.stream_encode import to_pcm16
from core.infra.settings import Settings
from core.queue.store import Queue
from workers.documents import DRAFT_TTL_S, EncodeStopped, PartsMissing, encode_document

PARTS = 20  # 8 s each: 160 s, several pieces in flac


async def stored_parts(aredis: Redis, queue: Queue, job_id: str) -> int:
    """Parts of noise (so that FLAC cannot squeeze them) as a worker stores them; samples."""
    rng = np.random.default_rng(1)
    samples = 0
    for _ in range(PARTS):
        part = to_pcm16((0.2 * rng.standard_normal(SAMPLE_RATE * 8)).astype(np.float32))
        samples += len(part) // 2
        await aredis.rpush(queue.keys.parts(job_id), part)  # type: ignore[misc]
    return samples


@pytest.mark.parametrize("fmt", ["flac", "mp3"])
async def test_parts_encoded_into_equal_pieces(fmt: str, settings: Settings, aredis: Redis) -> None:
    queue = Queue(aredis, settings)
    samples = await stored_parts(aredis, queue, "doc")
    draft = queue.keys.pieces_draft("doc", "token-1")
    await aredis.rpush(draft, b"left by a failed try")  # type: ignore[misc]
    size = await encode_document(queue, "doc", "token-1", fmt, SAMPLE_RATE, PARTS)
    pieces: Any = await aredis.lrange(draft, 0, -1)
    data = b"".join(pieces)
    assert len(data) == size and {len(p) for p in pieces[:-1]} <= {FILE_PIECE_BYTES}
    assert 0 < await aredis.ttl(draft) <= DRAFT_TTL_S  # an attempt that dies leaves it a while
    if fmt == "flac":  # several pieces, the first written last, with the length in it
        assert len(pieces) > 2 and data.startswith(b"fLaC")
        assert sf.info(io.BytesIO(data)).frames == samples
    else:
        assert abs(sf.info(io.BytesIO(data)).frames - samples) < SAMPLE_RATE // 10
    await queue.stored.discard_pieces("doc", "token-1")  # a completion refused: it goes
    assert not await aredis.exists(draft)


async def test_a_missing_part_is_refused(settings: Settings, aredis: Redis) -> None:
    queue = Queue(aredis, settings)
    await stored_parts(aredis, queue, "doc")
    with pytest.raises(PartsMissing, match="parts 17-21"):
        await encode_document(queue, "doc", "token-1", "mp3", SAMPLE_RATE, PARTS + 1)


@pytest.mark.parametrize("fmt", ["ogg", "flac"])
async def test_pieces_stay_whole_when_the_encoders_last_bytes_cross_one(
    fmt: str, settings: Settings, aredis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Small pieces, so that the bytes the encoder leaves for its close cross a piece's end (as
    they do now and then at the real size): every piece but the last is whole, and the file
    reads back from the pieces at any offset."""
    size = 4_000
    monkeypatch.setattr("workers.documents.FILE_PIECE_BYTES", size)
    monkeypatch.setattr("core.queue.stored_audio.FILE_PIECE_BYTES", size)
    queue = Queue(aredis, settings)
    await stored_parts(aredis, queue, "doc")
    total = await encode_document(queue, "doc", "token-1", fmt, SAMPLE_RATE, PARTS)
    await aredis.rename(queue.keys.pieces_draft("doc", "token-1"), queue.keys.pieces("doc"))
    pieces: Any = await aredis.lrange(queue.keys.pieces("doc"), 0, -1)
    assert {len(p) for p in pieces[:-1]} == {size} and 0 < len(pieces[-1]) <= size
    data = b"".join(pieces)
    assert len(data) == total
    for start, length in ((0, total), (size - 7, 20), (total - 5, 5), (3 * size, size)):
        assert await queue.stored.read_pieces("doc", start, length) == data[start : start + length]


async def test_a_job_that_left_stops_its_encode(settings: Settings, aredis: Redis) -> None:
    queue = Queue(aredis, settings)
    await stored_parts(aredis, queue, "doc")
    with pytest.raises(EncodeStopped, match="left this worker"):
        await encode_document(queue, "doc", "t", "mp3", SAMPLE_RATE, PARTS, stopped=lambda: True)
