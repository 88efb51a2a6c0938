"""A finished document's file in a compressed format: its PCM parts encoded once, in order, into
pieces of equal size (core/audio/documents.py), with memory bounded whatever its length."""

from __future__ import annotations

import asyncio

from core.audio.documents import BYTES_PER_SAMPLE, FILE_PIECE_BYTES
from core.audio.stream_encode import StreamEncoder, flac_with_total
from core.queue.store import Queue

# How long a draft outlives its last piece: an attempt that died while encoding leaves it.
DRAFT_TTL_S = 3600
# Parts read per round trip: a few MB of PCM at most (a part is one segment, 95 s at the longest).
PARTS_PER_READ = 8


class PartsMissing(Exception):
    """A part expired or vanished under the encode: the document cannot be completed."""


async def encode_document(
    queue: Queue, job_id: str, token: str, fmt: str, sample_rate: int, parts: int
) -> int:
    """Encode the document's `parts` into the pieces of its attempt's draft (completion makes
    them the job's file); the file's size. Encoding runs in a thread, a batch at a time: the
    event loop (leases, heartbeats) and the engine go on meanwhile. A FLAC's first piece is kept
    back until its length is known, then written into its header (as a whole file's is)."""
    stored, ttl_s = queue.stored, DRAFT_TTL_S
    await stored.discard_pieces(job_id, token)
    encoder = StreamEncoder(fmt, sample_rate)
    pending, size, samples = bytearray(), 0, 0
    head: bytes | None = None
    for first in range(0, parts, PARTS_PER_READ):
        last = min(first + PARTS_PER_READ, parts) - 1
        batch = await stored.parts(job_id, first, last)
        if len(batch) != last - first + 1:
            raise PartsMissing(f"parts {first + 1}-{last + 1} of the document are gone")
        pcm = b"".join(batch)
        samples += len(pcm) // BYTES_PER_SAMPLE
        pending += await asyncio.to_thread(encoder.feed, pcm)
        while len(pending) >= FILE_PIECE_BYTES:
            piece = bytes(pending[:FILE_PIECE_BYTES])
            del pending[:FILE_PIECE_BYTES]
            if fmt == "flac" and not size:
                head = piece
            else:
                await stored.add_piece(job_id, token, piece, ttl_s)
            size += FILE_PIECE_BYTES
    pending += await asyncio.to_thread(encoder.close)
    if fmt == "flac" and head is None:  # the whole file is one piece
        pending = bytearray(flac_with_total(bytes(pending), samples))
    if pending:
        await stored.add_piece(job_id, token, bytes(pending), ttl_s)
        size += len(pending)
    if head is not None:
        await stored.add_piece(job_id, token, flac_with_total(head, samples), ttl_s, first=True)
    return size
