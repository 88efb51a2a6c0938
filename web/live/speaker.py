"""One live context: text in as it is written, cut into segments as soon as each is safe to
speak, each segment a streamed job of the context's voice and seed, their audio out in order."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
from aiohttp import web

from core.audio.formats import SAMPLE_RATE
from core.infra.redis_client import REDIS_DOWN
from core.queue.job import SynthesisRequest
from core.queue.store import Submitted
from web import following, job_service
from web.appkeys import MEMORY, QUEUE, SETTINGS
from web.errors import ApiError, redis_unavailable
from web.intake import door
from web.live.options import LiveOptions
from web.live.pieces import AlignedPieces, AudioPiece, SpokenSegment
from web.live.text import PendingText

log = logging.getLogger("chattts_online.web.live")

# A pause in the text this long after a sentence's end speaks it (an LLM that stops for a tool
# call, or at the end of its answer without a flush).
PAUSE_S = 0.3
# What a character of text waiting costs the process, about (a str of CJK text takes 2-4 bytes
# a character, and the cutter's copies as much again).
CHAR_BYTES = 4
# A piece of audio handed on at once, at most: a cached segment arrives as one file, and a
# listener's frames stay small (a second of speech).
PIECE_BYTES = SAMPLE_RATE * 2


@dataclass(frozen=True)
class _Queued:
    """A segment whose job is queued: its place in the context, its request, where its events
    start."""

    index: int
    request: SynthesisRequest
    job_id: str
    cursor: str | None


class ListenerGone(Exception):
    """The listener takes nothing more (its client stopped reading): the context stops."""


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


class Speaker:
    """A context's text, segments and audio. `feed`, `flush`, `end` return at once; the audio
    goes to the listener from a task of its own, one segment job synthesizing at a time (the next
    is submitted when the current one's synthesis ends, and made while the listener plays it)."""

    def __init__(
        self,
        app: web.Application,
        client: str,
        source: str,
        options: LiveOptions,
        listener: Listener,
    ) -> None:
        self.app, self.client, self.source = app, client, source
        self.options, self.listener = options, listener
        self.limits = app[SETTINGS].limits
        # Its options, admitted with its first segment; each later one is their request with
        # its own text (no voice named: the first segment's language picks it, the rest keep it).
        self.template = door.Template(app, door.Who(client, source), options.fields)
        self.text = PendingText()
        self.received = 0  # characters over the context's life
        self.segments = 0  # segments spoken or speaking
        self.audio_ms = 0.0  # the context's audio so far
        self.ended = False
        self._fed = 0  # text messages so far
        self.charged = 0  # bytes of the text waiting, counted in the memory budget
        self.last_active = time.monotonic()
        self._wake = asyncio.Event()
        self._speaking: asyncio.Task[None] | None = None
        # The next segment, being checked and queued while the current one is heard (its job
        # made ahead, so that it is ready at the joint); at most one ahead.
        self._ahead: asyncio.Task[_Queued | None] | None = None
        self._jobs: set[str] = set()  # queued and not yet heard to their end
        self._generation = 0  # a clear starts a new one: what was queued before is dropped
        self._verdicts: set[asyncio.Task[None]] = set()  # segments heard, their jobs not ended
        self._task = asyncio.create_task(self._run())

    # -- the client's side ------------------------------------------------------------------

    @property
    def pending_chars(self) -> int:
        """Text received and not yet submitted (what the client is ahead of speech by)."""
        return self.text.chars

    @property
    def done(self) -> bool:
        return self._task.done()

    def feed(self, text: str, flush: bool = False) -> None:
        """Take the next piece of text (any size); speak what it completes."""
        if self.ended:
            raise ApiError(
                409,
                "this context was closed: open a new one for more text",
                code="context_closed",
            )
        if len(text) > self.limits.live_message_chars:
            raise ApiError(
                413,
                f"at most {self.limits.live_message_chars} characters per text message; send "
                "the text in smaller pieces",
                code="message_too_long",
                param="text",
            )
        if self.received + len(text) > self.limits.live_context_chars:
            raise ApiError(
                413,
                f"a context takes at most {self.limits.live_context_chars} characters over its "
                "life: close it and open a new one",
                code="context_too_long",
                param="text",
            )
        if self.pending_chars + len(text) > self.limits.live_pending_chars:
            raise ApiError(
                429,
                f"this context holds {self.pending_chars} characters not yet spoken (at most "
                f"{self.limits.live_pending_chars}): wait for its audio before sending more",
                code="text_ahead_of_speech",
                param="text",
            )
        # The text waiting counts in the process's memory budget, like a request's body.
        self.app[MEMORY].take(self.source, len(text) * CHAR_BYTES, "a live session's text")
        self.charged += len(text) * CHAR_BYTES
        self.received += len(text)
        self.last_active = time.monotonic()
        self.text.add(text, flush)
        self._wake.set()
        if self._speaking is not None:
            self._queue_ahead()
        self._fed += 1
        if not flush:
            asyncio.get_running_loop().call_later(PAUSE_S, self._after_pause, self._fed)

    def _after_pause(self, fed: int) -> None:
        """No text came for PAUSE_S since message `fed`: a sentence the text may end with is
        spoken now ("It costs 3." waits for what follows: "3.14"?), so an answer that stops
        after such a sentence is heard without a flush."""
        if fed == self._fed and not self.ended and self.text.may_end_a_sentence():
            self.flush()

    def _recharge(self) -> None:
        """Count what waits now (the cutter cleans text: it may hold less than was fed)."""
        held = self.pending_chars * CHAR_BYTES
        if held < self.charged:
            self.app[MEMORY].give(self.source, self.charged - held)
            self.charged = held

    def flush(self) -> None:
        """Speak everything received so far, even mid-sentence."""
        self.last_active = time.monotonic()
        self.text.flush()
        self._wake.set()
        if self._speaking is not None:
            self._queue_ahead()

    def end(self) -> None:
        """No more text: the rest is spoken, then the listener is told `finished`."""
        self.flush()
        self.ended = True
        self._wake.set()

    async def clear(self) -> None:
        """Barge-in: drop the text not yet spoken, the segment queued ahead and the one heard
        now; the context takes new text afterwards."""
        self.text.clear()
        self._recharge()
        self.last_active = time.monotonic()
        await self._stop_segments()
        await self.listener.cleared()

    async def aclose(self) -> None:
        """Stop at once (the connection is gone): nothing more goes to the listener."""
        await self._stop_segments(self._task)
        self.text.clear()
        self._recharge()

    async def _stop_segments(self, *more: asyncio.Task[None]) -> None:
        """Cancel the segment heard, the one queued ahead (and `more` tasks) and their jobs.
        All are taken before any is cancelled: a cancelled loop forgets what it was hearing."""
        self._generation += 1
        jobs, self._jobs = list(self._jobs), set()
        tasks = [task for task in (*more, self._speaking, self._ahead) if task is not None]
        tasks += self._verdicts
        self._ahead = None
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        for job_id in jobs:
            await self._cancel(job_id)

    def idle_s(self) -> float:
        """Seconds since the client last sent text and nothing was left to speak (0 while
        something is spoken)."""
        if self._speaking is not None or self._ahead is not None or self.text.waiting:
            return 0.0
        return time.monotonic() - self.last_active

    # -- speaking -----------------------------------------------------------------------------

    async def _run(self) -> None:
        with contextlib.suppress(ListenerGone):
            await self._speak_all()

    async def _speak_all(self) -> None:
        while True:
            self._wake.clear()
            queued = await self._next_queued()
            if queued is None:
                if self.ended and not self.text.waiting:
                    if self._verdicts:  # "done" comes after every segment's verdict
                        await asyncio.wait(self._verdicts)
                    await self.listener.finished(self.segments, self.audio_ms)
                    return
                if not self.text.waiting:
                    await self._wake.wait()
                continue
            self._speaking = asyncio.create_task(self._speak(queued))
            self._queue_ahead()
            try:
                await asyncio.wait([self._speaking])  # a clear cancels this task, not the loop
            finally:
                speaking, self._speaking = self._speaking, None
                self._jobs.discard(queued.job_id)
                self.last_active = time.monotonic()
            error = None if speaking.cancelled() else speaking.exception()
            if isinstance(error, ListenerGone):
                raise error
            if error is not None:
                log.error("live segment failed", exc_info=error)
                await self.listener.failed(_unexpected(error))

    async def _next_queued(self) -> _Queued | None:
        """The segment to be heard next: the one queued ahead, else the next one cut, queued
        now (None: none yet, or it had nothing to say, or a clear dropped it)."""
        if self._ahead is None:
            self._queue_ahead()
        ahead = self._ahead
        if ahead is None:
            return None
        await asyncio.wait([ahead])  # a clear cancels it, not this loop
        if self._ahead is ahead:
            self._ahead = None
        if ahead.cancelled():
            return None
        if ahead.exception() is not None:
            raise ahead.exception()  # type: ignore[misc]
        return ahead.result()

    def _queue_ahead(self) -> None:
        """Queue the next segment cut, if there is one and none is queued ahead yet."""
        if self._ahead is not None:
            return
        text = self.text.next()
        self._recharge()
        if text is not None:
            self._ahead = asyncio.create_task(self._queue(text))

    async def _queue(self, text: str) -> _Queued | None:
        """Check a segment and queue its job (None: nothing to say in it, or refused: the
        listener is told, and the rest goes on)."""
        generation = self._generation
        try:
            request = await self.template.request(text)
            if request is None:
                return None
            enqueue = asyncio.ensure_future(door.queue(self.app, self.template.by, request))
            enqueue.add_done_callback(functools.partial(self._queued, generation))
            submitted = await asyncio.shield(enqueue)
        except ApiError as exc:
            await self.listener.failed(exc)
            return None
        self.segments += 1
        return _Queued(self.segments, request, submitted.job_id, submitted.event_id)

    def _queued(self, generation: int, enqueue: asyncio.Future[Submitted]) -> None:
        """A job is queued: it is the context's to cancel, unless a clear came meanwhile (then
        it is cancelled now, even if whoever queued it was cancelled meanwhile too)."""
        if enqueue.cancelled() or enqueue.exception() is not None:
            return
        job_id = enqueue.result().job_id
        if generation == self._generation:
            self._jobs.add(job_id)
        else:
            asyncio.get_running_loop().create_task(self._cancel(job_id))

    async def _speak(self, queued: _Queued) -> None:
        request = queued.request
        pieces = AlignedPieces(queued.index, request.text, self.audio_ms, request.speed)
        try:
            async for pcm in self._pcm(queued.job_id, queued.cursor):
                # (its last chunk ends it: the worker may check it after it is heard)
                for at in range(0, len(pcm), PIECE_BYTES):
                    piece = pieces.next(pcm[at : at + PIECE_BYTES])
                    self.audio_ms += piece.duration_ms
                    await self.listener.audio(piece)
            rest = pieces.rest()
            if rest is not None:
                await self.listener.audio(rest)
            await self.listener.segment_end(pieces.spoken())
        except ApiError as exc:
            await self.listener.failed(exc)
            return
        verdict = asyncio.create_task(self._verdict(queued))
        self._verdicts.add(verdict)
        verdict.add_done_callback(self._verdicts.discard)

    async def _verdict(self, queued: _Queued) -> None:
        """Tell the listener what the worker heard in a segment, once its job ended."""
        try:
            end = await following.wait_end(self.app, queued.job_id, queued.cursor)
            if end.get("type") != "succeeded":
                return
            cues = await self.app[QUEUE].stored.cues(queued.job_id)
            checks = [check for cue in cues if (check := orjson.loads(cue).get("check"))]
            if checks:
                await self.listener.checked(queued.index, checks)
        except ListenerGone:
            return
        except (ApiError, following.Closing, *REDIS_DOWN) as exc:
            log.info("live segment %s: its verdict was not told (%s)", queued.job_id, exc)

    async def _pcm(self, job_id: str, cursor: str | None) -> AsyncIterator[bytes]:
        """The segment's PCM as it is made. A job that starts again after its audio began (its
        worker died) is followed on: its new run's audio from the sample where the last one
        stopped (the same text, voice and seed: the rest of the same segment)."""
        sent = 0
        while True:
            try:
                pieces = following.pcm_pieces(
                    self.app, job_id, cursor, whole_file=True, to_last_chunk=True
                )
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

    async def _cancel(self, job_id: str) -> None:
        with contextlib.suppress(ApiError, Exception):
            await job_service.cancel(self.app, job_id, self.client)


def _unexpected(error: BaseException | None) -> ApiError:
    if isinstance(error, REDIS_DOWN):
        return redis_unavailable()
    return ApiError(500, "internal error; it was logged", code="internal_error")
