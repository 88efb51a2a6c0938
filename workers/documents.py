"""A finished document's file: in wav or pcm its parts joined when served; in another format its
PCM parts encoded once, in order, into pieces of equal size (core/audio/documents.py), with
memory bounded whatever its length."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from redis.exceptions import RedisError

from core.audio.catalog import JOINED_FORMATS
from core.audio.documents import BYTES_PER_SAMPLE, FILE_PIECE_BYTES, document_size
from core.audio.stream_encode import StreamEncoder, flac_with_total
from core.audio_store.base import StoreError
from core.queue.store import Queue
from workers.jobs import ActiveJob

log = logging.getLogger("chattts_online.worker")

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


async def document_file(queue: Queue, job: ActiveJob, sample_rate: int, worker: str) -> int:
    """A finished document's file size: its parts joined, or in a format other than wav or pcm,
    the file encoded from them into its attempt's draft (EncodeStopped if the job leaves)."""
    fmt = job.started.request.format
    if fmt in JOINED_FORMATS:
        return document_size(job.samples_done, fmt)
    began = time.monotonic()
    size = await encode_document(
        *(queue, job.job_id, job.started.token, fmt, sample_rate, len(job.segments)),
        stopped=lambda: job.dropped,
    )
    log.info(
        "worker %s: document %s encoded to %s: %.1f MB in %.1f s",
        *(worker, job.job_id, fmt, size / 1e6, time.monotonic() - began),
        extra={"job_id": job.job_id},
    )
    return size


async def discard_draft(queue: Queue, job: ActiveJob) -> None:
    """A document's encoded file that will not be its file (best effort: an abandoned draft
    expires, its objects go with the job)."""
    if job.document:
        with contextlib.suppress(RedisError, StoreError):
            await queue.stored.discard_pieces(job.job_id, job.started.token)
