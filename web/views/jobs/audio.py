"""Audio of a finished job and of finished segments while a job streams (ETag and Range aware)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from core.audio.catalog import CATALOG, JOINED_FORMATS
from core.audio.documents import BYTES_PER_SAMPLE, document_size
from core.audio.formats import SAMPLE_RATE
from core.audio.isolated import CodecCrashed
from core.audio.stream_encode import wav_header
from core.queue.job import Job, JobState
from core.queue.keys import PARTS_LINGER_S
from web import job_service
from web.appkeys import CODECS, DERIVED, MEMORY, QUEUE, SETTINGS
from web.errors import ApiError, not_found
from web.monitors.memory import address
from web.replies.documents import stream_document
from web.replies.sending import PIECE_BYTES, disposition, holding, send_bytes, send_pieces

# What a segment may take, reserved before it is read: a ChatTTS segment at its longest (about
# 95 s) is 4.6 MB of WAV; a document's part as much of PCM.
SEGMENT_RESERVE_BYTES = 5 * 1024 * 1024


def _not_ready(job: Job, what: str) -> ApiError:
    return ApiError(
        409,
        f"{what} is not ready: the job is {job.state.value}; wait for its 'succeeded' event "
        "or retry shortly",
        code="not_ready",
        headers={"Retry-After": "1"},
        state=job.state.value,
    )


def _ended(job: Job) -> ApiError:
    reason = f": {job.error}" if job.error else ""
    return ApiError(
        409,
        f"the job ended {job.state.value}{reason}; it has no audio",
        code=f"job_{job.state.value}",
        state=job.state.value,
    )


async def job_audio(request: web.Request) -> web.StreamResponse:
    job = await job_service.get(request.app, request.match_info["job_id"])
    if job.state in (JobState.QUEUED, JobState.RUNNING):
        raise _not_ready(job, "the audio")
    if job.state != JobState.SUCCEEDED:
        raise _ended(job)
    if job.document:
        return await _document(request, job)
    fmt = job.request.format
    attachment = disposition(request, f"tts-{job.id[:8]}.{CATALOG[fmt].extension}")
    redirect_s = request.app[SETTINGS].store.audio_store_redirect_s
    if redirect_s > 0:
        link = await request.app[QUEUE].stored.link(
            job.id, redirect_s, CATALOG[fmt].mime, attachment
        )
        if link:  # the store serves the bytes (and Range, and ETag) itself
            raise web.HTTPTemporaryRedirect(link, headers={"Cache-Control": "private, no-store"})
    size, etag = job.audio_size or 0, f'"{job.id}"'
    if size > PIECE_BYTES:
        return await _in_pieces(request, job, size, _headers(CATALOG[fmt].mime, etag, attachment))
    with holding(request, size):
        data = await request.app[QUEUE].stored.file(job.id)
        if data is None:
            raise not_found(f"the audio of job {job.id} expired", "audio_expired")
        return await ranged(request, data, CATALOG[fmt].mime, etag=etag, disposition=attachment)


async def _in_pieces(
    request: web.Request, job: Job, size: int, headers: dict[str, str]
) -> web.StreamResponse:
    """A large file (or a document's encoded file), read from where it is kept a piece at a
    time as it is sent."""
    stored = request.app[QUEUE].stored
    source = stored.read_pieces if job.document else stored.read_file

    async def read(start: int, length: int) -> bytes | None:
        return await source(job.id, start, length)

    kept = await stored.has_pieces(job.id) if job.document else await read(0, 1) is not None
    if not kept:
        raise not_found(f"the audio of job {job.id} expired", "audio_expired")
    decision = _conditions(request, size, headers["ETag"])
    if decision == "not_modified":
        return _not_modified(headers)
    if isinstance(decision, tuple):
        start, end = decision
        headers["Content-Range"] = f"bytes {start}-{end}/{size}"
        return await send_pieces(request, read, start, end, headers, status=206)
    return await send_pieces(request, read, 0, size - 1, headers)


async def job_segment(request: web.Request) -> web.StreamResponse:
    """Segment n (1-based) of a job, as soon as it is synthesized (before the job finishes)."""
    job = await job_service.get(request.app, request.match_info["job_id"])
    n = int(request.match_info["n"])
    # A one-segment job records no count: its file is its one segment.
    total = job.segments_total or (1 if job.state == JobState.SUCCEEDED else 0)
    if n < 1 or (total and n > total):
        has = f"it has {total}" if total else "how many it has is known once it runs"
        raise not_found(
            f"job {job.id} has no segment {n} (segments are numbered from 1; {has})",
            "segment_not_found",
        )
    if job.state in (JobState.QUEUED, JobState.RUNNING) and n > job.segments_done:
        raise _segment_not_ready(job, n)  # said before any memory is reserved for it
    fmt = job.request.format
    attachment = disposition(request, f"tts-{job.id[:8]}-{n}.{CATALOG[fmt].extension}")
    whole = job.state == JobState.SUCCEEDED and job.segments_total <= 1 and not job.document
    if whole and (job.audio_size or 0) > PIECE_BYTES:  # its file: a piece at a time, as /audio
        headers = _headers(CATALOG[fmt].mime, f'"{job.id}-{n}"', attachment)
        return await _in_pieces(request, job, job.audio_size or 0, headers)
    # A segment's size is known once it is read: a bound is reserved first, so that a crowd
    # of requests is refused before any reads, then corrected to the size read.
    memory, source = request.app[MEMORY], address(request)
    memory.take(source, SEGMENT_RESERVE_BYTES, "a segment to send")
    held = SEGMENT_RESERVE_BYTES
    try:
        data = await _segment_bytes(request, job, n)
        memory.resize(source, held, len(data))
        held = len(data)
        etag = f'"{job.id}-{n}"'
        return await ranged(request, data, CATALOG[fmt].mime, etag=etag, disposition=attachment)
    finally:
        memory.give(source, held)


async def _segment_bytes(request: web.Request, job: Job, n: int) -> bytes:
    queue = request.app[QUEUE]
    data: Any
    if job.document:  # a part: its PCM, the pause before it included
        data = await queue.stored.part(job.id, n)
        if data is not None:
            data = await _part_as(request, job, n, data)
    elif job.state == JobState.SUCCEEDED and job.segments_total <= 1 and n == 1:
        data = await queue.stored.file(job.id)  # a one-segment job's file is its only segment
    else:
        data = await queue.stored.segment(job.id, n)
    if data is None:
        if job.state in (JobState.QUEUED, JobState.RUNNING):
            raise _segment_not_ready(job, n)
        if job.state != JobState.SUCCEEDED:
            raise _ended(job)
        if job.document and job.request.format not in JOINED_FORMATS:
            raise not_found(
                f"the parts of job {job.id} went {PARTS_LINGER_S // 60} minutes after its "
                f"{job.request.format} file was made from them: its whole file is at "
                f"/v1/tts/jobs/{job.id}/audio (Range works there)",
                "segment_expired",
            )
        raise not_found(f"segment {n} of job {job.id} expired", "segment_expired")
    return bytes(data)


def _segment_not_ready(job: Job, n: int) -> ApiError:
    done = f"{job.segments_done} of {job.segments_total or '?'} done"
    return ApiError(
        404,
        f"segment {n} of job {job.id} is not synthesized yet ({done}); retry shortly",
        code="segment_not_ready",
        headers={"Retry-After": "1"},
        state=job.state.value,
    )


async def _part_as(request: web.Request, job: Job, n: int, pcm: bytes) -> bytes:
    """A document's part in the job's format: a WAV header before it, or encoded once per web
    process, in the encoders' child process (web/derived.py: kept, and a few at a time per
    address)."""
    fmt = job.request.format
    if fmt in JOINED_FORMATS:
        return wav_header(len(pcm) // BYTES_PER_SAMPLE, SAMPLE_RATE) + pcm if fmt == "wav" else pcm

    def build() -> bytes:  # the encoder of the document's own file (workers/documents.py)
        return request.app[CODECS].encode_pcm(pcm, SAMPLE_RATE, fmt)

    try:
        return await request.app[DERIVED].get((job.id, "part", n), build, address(request))
    except CodecCrashed as exc:
        raise ApiError(
            500,
            f"part {n} could not be encoded ({exc}); the whole file is at "
            f"/v1/tts/jobs/{job.id}/audio",
            code="encode_failed",
        ) from None


# -- conditional and partial responses (RFC 9110) ------------------------------------------------


def _requested_range(request: web.Request, size: int) -> tuple[int, int] | bool | None:
    """The Range header as aiohttp parses it (RFC 9110's single `bytes` range), for `size`
    bytes: (start, end) inclusive; None to serve the whole (no header, or one we may ignore:
    several ranges, another unit); False when unsatisfiable."""
    if "Range" not in request.headers:
        return None
    try:
        wanted = request.http_range
    except ValueError:  # several ranges, another unit, or malformed: the whole representation
        return None
    start, stop = wanted.start, wanted.stop
    if start is None:
        return None
    if start < 0 or request.headers["Range"].strip().lower().startswith("bytes=-"):  # a suffix
        length = -start
        if length <= 0 or size == 0:
            return False  # "bytes=-0" asks for no byte
        return max(0, size - length), size - 1
    if start >= size:
        return False
    return start, min(stop - 1, size - 1) if stop is not None else size - 1


async def _document(request: web.Request, job: Job) -> web.StreamResponse:
    """A document's file: joined from its parts as it is sent (web/replies/documents.py), or
    in another format than wav or pcm, read from the pieces it was encoded into."""
    fmt = job.request.format
    etag = f'"{job.id}"'
    attachment = disposition(request, f"tts-{job.id[:8]}.{CATALOG[fmt].extension}")
    headers = _headers(CATALOG[fmt].mime, etag, attachment)
    if fmt not in JOINED_FORMATS:
        return await _in_pieces(request, job, job.audio_size or 0, headers)
    decision = _conditions(request, document_size(job.samples_done, fmt), etag)
    if isinstance(decision, str):
        return _not_modified(headers)
    return await stream_document(request, job, headers, decision)


def _headers(content_type: str, etag: str, disposition: str) -> dict[str, str]:
    return {
        "Content-Type": content_type,
        "ETag": etag,
        "Accept-Ranges": "bytes",
        "Cache-Control": "private, max-age=3600",
        "Content-Disposition": disposition,
    }


def _not_modified(headers: dict[str, str]) -> web.Response:
    cache = {"ETag": headers["ETag"], "Cache-Control": headers["Cache-Control"]}
    return web.Response(status=304, headers=cache)


def _conditions(request: web.Request, size: int, etag: str) -> tuple[int, int] | str | None:
    """'not_modified' (If-None-Match), the range to send (Range, If-Range), or None (all);
    416 when the range lies outside the `size` bytes."""
    tag = etag.strip('"')
    if any(t.value in (tag, "*") for t in request.if_none_match or ()):  # weak comparison
        return "not_modified"
    range_header = request.headers.get("Range")
    # aiohttp's `if_range` reads the date form only; our validators are entity tags, compared
    # strongly (RFC 9110 13.1.5). A date never matches: the whole representation is sent.
    if_range = request.headers.get("If-Range")
    if range_header and (if_range is None or if_range.strip() == etag):
        parsed = _requested_range(request, size)
        if parsed is False:
            raise ApiError(
                416,
                f"the range {range_header!r} lies outside the {size} bytes of the audio",
                code="range_not_satisfiable",
                headers={"Content-Range": f"bytes */{size}"},
            )
        if isinstance(parsed, tuple):
            return parsed
    return None


async def ranged(
    request: web.Request, data: bytes, content_type: str, *, etag: str, disposition: str
) -> web.StreamResponse:
    """The bytes, honouring If-None-Match (304), Range and If-Range (206, 416)."""
    headers = _headers(content_type, etag, disposition)
    decision = _conditions(request, len(data), etag)
    if decision == "not_modified":
        return _not_modified(headers)
    if isinstance(decision, tuple):
        start, end = decision
        headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
        return await send_bytes(request, data[start : end + 1], headers, status=206)
    return await send_bytes(request, data, headers)
