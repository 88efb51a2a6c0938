"""One live context: text in as it is written, cut into segments as soon as each is safe to
speak, each segment a streamed job of the context's voice and seed, their audio out in order."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time

from aiohttp import web

from core.queue.results import Submitted
from web.appkeys import MEMORY, SETTINGS
from web.errors import ApiError
from web.intake import door
from web.live.options import LiveOptions
from web.live.segment import Listener, Segment, cancel, hear, tell_verdict, unexpected
from web.live.text import PendingText, check_more
from web.replies.sockets import SlowReader

log = logging.getLogger("chattts_online.web.live")

# A pause in the text this long after a sentence's end speaks it (an LLM that stops for a tool
# call, or at the end of its answer without a flush).
PAUSE_S = 0.3


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
        self.listener = listener
        self.limits = app[SETTINGS].limits
        # Its options, admitted with its first segment; each later one is their request with
        # its own text (no voice named: the first segment's language picks it, the rest keep it).
        self.template = door.Template(app, door.Who(client, source), options.fields)
        self.text = PendingText(app[MEMORY], source)  # its bytes in the memory budget
        self.received = 0  # characters over the context's life
        self.segments = 0  # segments spoken or speaking
        self.audio_ms = 0.0  # the context's audio so far
        self.ended = False
        self._fed = 0  # text messages so far
        self.last_active = time.monotonic()
        self._wake = asyncio.Event()
        self._speaking: asyncio.Task[None] | None = None
        # The next segment, being checked and queued while the current one is heard (its job
        # made ahead, so that it is ready at the joint); at most one ahead.
        self._ahead: asyncio.Task[Segment | None] | None = None
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
        check_more(self.limits, len(text), self.received, self.pending_chars)
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
        self.last_active = time.monotonic()
        await self._stop_segments()
        await self.listener.cleared()

    async def aclose(self) -> None:
        """Stop at once (the connection is gone): nothing more goes to the listener."""
        await self._stop_segments(self._task)
        self.text.clear()

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
            await cancel(self.app, job_id, self.client)

    def idle_s(self) -> float:
        """Seconds since the client last sent text and nothing was left to speak (0 while
        something is spoken)."""
        if self._speaking is not None or self._ahead is not None or self.text.waiting:
            return 0.0
        return time.monotonic() - self.last_active

    # -- speaking -----------------------------------------------------------------------------

    async def _run(self) -> None:
        with contextlib.suppress(SlowReader):
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
            if isinstance(error, SlowReader):
                raise error
            if error is not None:
                log.error("live segment failed", exc_info=error)
                await self.listener.failed(unexpected(error))

    async def _next_queued(self) -> Segment | None:
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
        if text is not None:
            self._ahead = asyncio.create_task(self._queue(text))

    async def _queue(self, text: str) -> Segment | None:
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
        return Segment(self.segments, request, submitted.job_id, submitted.event_id)

    def _queued(self, generation: int, enqueue: asyncio.Future[Submitted]) -> None:
        """A job is queued: it is the context's to cancel, unless a clear came meanwhile (then
        it is cancelled now, even if whoever queued it was cancelled meanwhile too)."""
        if enqueue.cancelled() or enqueue.exception() is not None:
            return
        job_id = enqueue.result().job_id
        if generation == self._generation:
            self._jobs.add(job_id)
        else:
            asyncio.get_running_loop().create_task(cancel(self.app, job_id, self.client))

    async def _speak(self, segment: Segment) -> None:
        self.audio_ms += await hear(self.app, segment, self.audio_ms, self.listener)
        verdict = asyncio.create_task(tell_verdict(self.app, segment, self.listener))
        self._verdicts.add(verdict)
        verdict.add_done_callback(self._verdicts.discard)
