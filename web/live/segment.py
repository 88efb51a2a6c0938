"""One segment of a live context as a job: its audio heard as it is made (where its job starts
again, resumed at the sample it stopped at), in pieces that carry their characters, and what its
worker heard told once its job ended."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
from aiohttp import web

from core.audio.formats import SAMPLE_RATE
from core.infra.redis_client import REDIS_DOWN
from core.queue.job import SynthesisRequest
from web import following, job_service
from web.appkeys import QUEUE
from web.errors import ApiError, redis_unavailable
from web.live.pieces import AlignedPieces, AudioPiece, SpokenSegment
from web.replies.sockets import SlowReader

log = logging.getLogger("chattts_online.web.live")

# A piece of audio handed on at once, at most: a cached segment arrives as one file, and a
# listener's frames stay small (a second of speech).
PIECE_BYTES = SAMPLE_RATE * 2


class Listener(Protocol):
    """Where a context's audio and news go (a protocol's connection)."""

    async def audio(self, piece: AudioPiece) -> None: ...

    async def segment_end(self, segment: SpokenSegment) -> None: ...

    async def checked(self, segment: int, checks: list[dict[str, Any]]) -> None:
        """What the worker heard in a segment (docs/checks.md): once its audio is all out and
        its job ended, each of its parts' verdicts."""

    async def cleared(self) -> None: ...

    async def finished(self, segments: int, audio_ms: float) -> None: ...

    async def failed(self, error: ApiError) -> None: ...


@dataclass(frozen=True)
class Segment:
    """A segment whose job is queued: its place in the context, its request, where its events
    start."""

    index: int
    request: SynthesisRequest
    job_id: str
    cursor: str | None


async def hear(app: web.Application, segment: Segment, start_ms: float, to: Listener) -> float:
    """Hand the segment's audio to the listener as it is made, from `start_ms` in the context's
    audio; the milliseconds of audio it held (its job's failure: told, and 0 more)."""
    request = segment.request
    pieces = AlignedPieces(segment.index, request.text, start_ms, request.speed)
    heard = 0.0
    try:
        async for pcm in _pcm(app, segment.job_id, segment.cursor):
            # (its last chunk ends it: the worker may check it after it is heard)
            for at in range(0, len(pcm), PIECE_BYTES):
                piece = pieces.next(pcm[at : at + PIECE_BYTES])
                heard += piece.duration_ms
                await to.audio(piece)
        rest = pieces.rest()
        if rest is not None:
            await to.audio(rest)
        await to.segment_end(pieces.spoken())
    except ApiError as exc:
        await to.failed(exc)
    return heard


async def tell_verdict(app: web.Application, segment: Segment, to: Listener) -> None:
    """Tell the listener what the worker heard in a segment, once its job ended."""
    try:
        end = await following.wait_end(app, segment.job_id, segment.cursor)
        if end.get("type") != "succeeded":
            return
        cues = await app[QUEUE].stored.cues(segment.job_id)
        checks = [check for cue in cues if (check := orjson.loads(cue).get("check"))]
        if checks:
            await to.checked(segment.index, checks)
    except SlowReader:
        return
    except (ApiError, following.Closing, *REDIS_DOWN) as exc:
        log.info("live segment %s: its verdict was not told (%s)", segment.job_id, exc)


async def _pcm(app: web.Application, job_id: str, cursor: str | None) -> AsyncIterator[bytes]:
    """The segment's PCM as it is made. A job that starts again after its audio began (its
    worker died) is followed on: its new run's audio from the sample where the last one
    stopped (the same text, voice and seed: the rest of the same segment)."""
    sent = 0
    while True:
        try:
            pieces = following.pcm_pieces(app, job_id, cursor, whole_file=True, to_last_chunk=True)
            async with contextlib.aclosing(pieces) as it:
                skip = sent
                async for pcm in it:
                    if skip >= len(pcm):
                        skip -= len(pcm)
                        continue
                    pcm, skip = pcm[skip:], 0
                    sent += len(pcm)
                    yield pcm
            return
        except following.Restarted:
            log.info("live segment job %s started again: resuming at byte %d", job_id, sent)
            cursor = None  # the new run's chunks, from its first event on


async def cancel(app: web.Application, job_id: str, client: str) -> None:
    """Cancel a segment's job, whatever state it is in (an ended one: nothing to do)."""
    with contextlib.suppress(ApiError, Exception):
        await job_service.cancel(app, job_id, client)


def unexpected(error: BaseException | None) -> ApiError:
    """What a listener is told of a segment that failed in an unexpected way."""
    if isinstance(error, REDIS_DOWN):
        return redis_unavailable()
    return ApiError(500, "internal error; it was logged", code="internal_error")
