"""A document job's file, streamed from its parts (core/audio/documents.py), Range aware:
a batch of parts at a time, counted in the memory budget, paced and within the write timeout."""

from __future__ import annotations

import bisect

import orjson
from aiohttp import web

from core.audio.documents import BYTES_PER_SAMPLE, WAV_HEADER_BYTES, document_size
from core.audio.formats import SAMPLE_RATE
from core.audio.stream_encode import wav_header
from core.queue.job import Job
from web.appkeys import QUEUE
from web.errors import ApiError, not_found
from web.replies.sending import holding, paced_write

PARTS_PER_READ = 16  # parts fetched per round trip: a few MB, whatever the document's length


async def part_ends(request: web.Request, job: Job) -> list[int]:
    """Where each part ends in the PCM, in bytes (from the cues, one per part)."""
    queue = request.app[QUEUE]
    raw = await queue.stored.cues(job.id)
    return [orjson.loads(cue)["end"] * BYTES_PER_SAMPLE for cue in raw]


async def stream_document(
    request: web.Request, job: Job, headers: dict[str, str], span: tuple[int, int] | None
) -> web.StreamResponse:
    """The file's bytes `span` (inclusive; None: all), joined from the parts as they are read."""
    fmt = job.request.format
    ends = await part_ends(request, job)
    samples = ends[-1] // BYTES_PER_SAMPLE if ends else 0
    if samples != job.samples_done:
        raise not_found(f"the audio of job {job.id} expired", "audio_expired")
    queue = request.app[QUEUE]
    if await queue.stored.part_count(job.id) != len(ends):  # before any byte goes
        raise not_found(f"the audio of job {job.id} expired", "audio_expired")
    size = document_size(samples, fmt)
    first, last = span if span is not None else (0, size - 1)
    response = web.StreamResponse(status=206 if span is not None else 200, headers=headers)
    response.content_length = last - first + 1
    if span is not None:
        response.headers["Content-Range"] = f"bytes {first}-{last}/{size}"
    await response.prepare(request)
    try:
        await _send_span(request, response, job, ends, samples, first, last)
        await response.write_eof()
    except TimeoutError:  # the client stopped reading: its connection goes, with its parts
        if request.transport is not None:
            request.transport.abort()
    return response


async def _send_span(
    request: web.Request,
    response: web.StreamResponse,
    job: Job,
    ends: list[int],
    samples: int,
    first: int,
    last: int,
) -> None:
    queue, fmt = request.app[QUEUE], job.request.format
    offset = WAV_HEADER_BYTES if fmt == "wav" else 0  # where the PCM starts in the file
    if first < offset:
        header = wav_header(samples, SAMPLE_RATE)[first : min(last + 1, offset)]
        await paced_write(request, response.write, header)
    start, stop = max(first, offset) - offset, last + 1 - offset  # in the PCM
    index = bisect.bisect_right(ends, start)  # the part holding byte `start` of the PCM
    final = bisect.bisect_left(ends, stop)  # the part holding the last byte asked for
    part_start = ends[index - 1] if index else 0
    while index < len(ends) and part_start < stop:
        through = min(index + PARTS_PER_READ - 1, final)
        with holding(request, ends[through] - part_start):  # counted before it is fetched
            batch = await queue.stored.parts(job.id, index, through)
            if not batch:
                raise ApiError(500, f"a part of job {job.id} is missing", code="audio_incomplete")
            for part in batch:
                end = part_start + len(part)
                piece = part[max(start, part_start) - part_start : min(stop, end) - part_start]
                await paced_write(request, response.write, piece)
                part_start = end
                index += 1
                if part_start >= stop:
                    break
