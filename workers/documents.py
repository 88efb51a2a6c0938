"""A finished document's file in a compressed format: its PCM parts encoded once, in order, into
pieces of equal size (core/audio/documents.py), with memory bounded whatever its length."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from core.audio.documents import BYTES_PER_SAMPLE, FILE_PIECE_BYTES
from core.audio.stream_encode import StreamEncoder, flac_with_total
from core.queue.store import Queue

# How long a draft outlives its last piece: an attempt that died while encoding leaves it.
DRAFT_TTL_S = 3600
# Parts read per round trip: a few MB of PCM at most (a part is one segment, 95 s at the longest).
PARTS_PER_READ = 8


class PartsMissing(Exception):
    """A part expired or vanished under the encode: the document cannot be completed."""


class EncodeStopped(Exception):
    """The job was cancelled or lost while its file was encoded: the encode stopped."""


async def encode_document(
    queue: Queue,
    job_id: str,
    token: str,
    fmt: str,
    sample_rate: int,
    parts: int,
    stopped: Callable[[], bool] = lambda: False,
) -> int:
    """Encode the document's `parts` into the pieces of its attempt's draft (completion makes
    them the job's file); the file's size. Encoding runs in a thread, a batch at a time: the
    event loop (leases, heartbeats) and the engine go on meanwhile; `stopped()` is asked between
    batches (EncodeStopped). A FLAC's first piece is kept back until its length is known, then
    written into its header (as a whole file's is) and put first."""
    stored = queue.stored
    await stored.discard_pieces(job_id, token)
    encoder = StreamEncoder(fmt, sample_rate)
    pending, size, samples = bytearray(), 0, 0
    head: bytes | None = None

    async def cut(final: bool) -> None:  # whole pieces out; the last one too when `final`
        nonlocal size, head
        while len(pending) >= FILE_PIECE_BYTES or (final and pending):
            piece = bytes(pending[:FILE_PIECE_BYTES])
            del pending[:FILE_PIECE_BYTES]
            if fmt == "flac" and not size:
                head = piece
            else:
                await stored.add_piece(job_id, token, piece, DRAFT_TTL_S)
            size += len(piece)

    for first in range(0, parts, PARTS_PER_READ):
        if stopped():
            raise EncodeStopped(f"job {job_id} left this worker while its file was encoded")
        last = min(first + PARTS_PER_READ, parts) - 1
        batch = await stored.parts(job_id, first, last)
        if len(batch) != last - first + 1:
            raise PartsMissing(f"parts {first + 1}-{last + 1} of the document are gone")
        pcm = b"".join(batch)
        samples += len(pcm) // BYTES_PER_SAMPLE
        pending += await asyncio.to_thread(encoder.feed, pcm)
        await cut(final=False)
    pending += await asyncio.to_thread(encoder.close)
    await cut(final=True)
    if head is not None:
        await stored.add_piece(job_id, token, flac_with_total(head, samples), DRAFT_TTL_S, True)
    if not size:
        raise PartsMissing("the document's parts held no audio")
    return size
