"""A job followed to its end, one way for every API: its terminal event, and its PCM read as
it is made (from its chunks, one run at a time)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator
from typing import Any

from aiohttp import web

from web.appkeys import HUB, QUEUE
from web.errors import ApiError
from web.hub import TERMINAL_TYPES, follow

# Chunks fetched per read of a replay: half a second each, a few seconds of audio, so that one
# listener joining a long job late neither holds its whole audio nor blocks Redis copying it.
CHUNKS_PER_READ = 8


class Closing(Exception):
    """The server shuts down before the job ended."""


class Restarted(ApiError):
    """A job started again (another attempt) after some of its audio went out: what was sent
    cannot be taken back, and the new attempt's audio must not be spliced onto it."""

    def __init__(self, job_id: str) -> None:
        super().__init__(
            503,
            f"job {job_id} started again after its audio began; retry the request, or fetch "
            f"its file when it ends: /v1/tts/jobs/{job_id}/audio",
            code="job_restarted",
        )


def job_error(event: dict[str, Any]) -> ApiError:
    """The answer for a job that ended other than in success (its terminal event)."""
    kind = str(event.get("type"))
    job = event.get("job") or {}
    reason = job.get("error") or kind
    if kind == "cancelled":
        return ApiError(409, f"the job was cancelled: {reason}", code="job_cancelled")
    return ApiError(500, f"synthesis failed: {reason}", code=f"job_{kind}")


def closing_error(job_id: str) -> ApiError:
    return ApiError(
        503,
        f"the server is shutting down; job {job_id} goes on: GET /v1/tts/jobs/{job_id}/audio",
        code="server_shutting_down",
        headers={"Retry-After": "1"},
    )


async def wait_end(app: web.Application, job_id: str, cursor: str | None) -> dict[str, Any]:
    """The job's terminal event (followed from `cursor`); Closing at shutdown."""
    queue = app[QUEUE]
    stream = queue.keys.job_events(job_id)
    async with contextlib.aclosing(follow(queue, app[HUB], stream, cursor, job_id=job_id)) as ev:
        async for _, event in ev:
            if event.get("type") in TERMINAL_TYPES:
                return event
    raise Closing


class ChunkReader:
    """A streaming job's PCM chunks, read as its events announce them, all from one run.

    Chunks hold the pauses between segments: in order, they join into the job's samples. Each
    `audio` event names the last chunk stored, `succeeded` the job's chunk count. A run is one
    start of the job (its `starts`): a reclaimed or released job starts its chunks again, and
    they must never be spliced onto another run's. Events of a run older than the one whose
    chunks are stored are skipped while nothing went out (a listener that joins after a
    restart hears the new run whole); once audio went out, another run raises Restarted."""

    def __init__(self, app: web.Application, job_id: str) -> None:
        self.queue = app[QUEUE]
        self.job_id = job_id
        self.sent = 0
        self.run: int | None = None  # the run whose chunks went out

    async def on_event(self, event: dict[str, Any]) -> AsyncGenerator[list[bytes], None]:
        """The chunks `event` makes available that were not read yet (none for other events),
        CHUNKS_PER_READ at a time: a replay of a long job never holds all of it at once."""
        kind, job = event.get("type"), event.get("job") or {}
        if kind == "audio":
            upto = int((event.get("chunk") or {}).get("index") or 0)
        elif kind == "succeeded":
            upto = int(job.get("chunks_done") or 0)
        else:
            return
        announced = job.get("starts")
        if self.run is not None and announced is not None and announced != self.run:
            raise Restarted(self.job_id)
        while self.sent < upto:
            last = min(upto, self.sent + CHUNKS_PER_READ) - 1
            chunks, run = await self.queue.stored.chunks_of_run(self.job_id, self.sent, last)
            if self.run is None:
                if announced is not None and announced != run:
                    return  # an earlier run's event: its chunks are gone, the current run's follow
            elif run != self.run:
                raise Restarted(self.job_id)  # the list holds a later run's chunks already
            if not chunks:
                return
            self.run = run
            self.sent += len(chunks)
            yield chunks


async def pcm_pieces(
    app: web.Application,
    job_id: str,
    cursor: str | None,
    *,
    whole_file: bool = True,
    to_last_chunk: bool = False,
) -> AsyncGenerator[bytes, None]:
    """The PCM of a streaming job as it is synthesized: its chunks, in order, as their events
    arrive; with `whole_file` (a job whose file is PCM), the whole file when it streamed none (a
    cache hit). `to_last_chunk`: it ends with the job's last chunk, not waiting for the job to
    end (its segments' checks, docs/checks.md). Raises ApiError when the job ends otherwise,
    Restarted when it starts again after audio went out, Closing at shutdown."""
    queue = app[QUEUE]
    reader = ChunkReader(app, job_id)
    stream = queue.keys.job_events(job_id)
    async with contextlib.aclosing(follow(queue, app[HUB], stream, cursor, job_id=job_id)) as ev:
        async for _, event in ev:
            kind = event.get("type")
            async with contextlib.aclosing(reader.on_event(event)) as batches:
                async for batch in batches:
                    for chunk in batch:
                        yield chunk
            if to_last_chunk and kind == "audio" and (event.get("chunk") or {}).get("last"):
                return
            if kind == "succeeded":
                if not reader.sent and whole_file:
                    audio = await queue.stored.file(job_id)
                    if audio is None:
                        raise ApiError(500, "the job's audio expired", code="audio_expired")
                    yield audio
                return
            if kind in TERMINAL_TYPES:
                raise job_error(event)
    raise Closing
