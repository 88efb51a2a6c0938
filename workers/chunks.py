"""A streaming job's audio leaving the worker in chunks while the engine is still synthesizing.

The engine thread hands over pieces of segments as they are decoded (`feed`, through the event
loop). They are published in order, segment after segment, each later segment's first chunk led
by the pause the final file puts between segments, so that a job's chunks join into exactly its
final file's samples. A job is completed only once its chunks are out (`drained`), so a listener
that reads up to the `chunks_done` of the succeeded event has everything.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from redis.exceptions import RedisError

from core.audio import formats as audio
from core.audio import sizes
from core.queue.store import Queue
from workers.engines.base import PlaybackClock, Segment
from workers.jobs import ActiveJob

log = logging.getLogger("chattts_online.worker")
# Chunks go out as fast as Redis takes them; this only bounds a completion's wait on a stuck one.
DRAIN_TIMEOUT_S = 30.0


@dataclass
class _Stream:
    job: ActiveJob
    segment: int = 0  # the segment whose chunks go out now
    published: int = 0  # chunks out
    sent: int = 0  # samples of the current segment out
    waiting: dict[int, list[tuple[np.ndarray, bool]]] = field(default_factory=dict)
    drained: asyncio.Event = field(default_factory=asyncio.Event)
    advanced: asyncio.Event = field(default_factory=asyncio.Event)  # set when a segment is out
    clock: PlaybackClock = field(default_factory=PlaybackClock)  # its listener's playback


class ChunkPublisher:
    def __init__(
        self, queue: Queue, sample_rate: int, on_gap: Callable[[float], None] | None = None
    ) -> None:
        """`on_gap(seconds)`: a listener who started ran dry that long before a chunk."""
        self.queue, self.on_gap = queue, on_gap
        self.rate = sample_rate
        self.gap = np.zeros(int(sample_rate * audio.SEGMENT_GAP_S), np.float32)
        self.streams: dict[str, _Stream] = {}
        self._inbox: asyncio.Queue[tuple[str, int, np.ndarray, bool]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.create_task(self._run(), name="chunks")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def open(self, job: ActiveJob) -> None:
        """Stream this job's audio (it asked to) from now on."""
        if job.started.request.stream and job.job_id not in self.streams:
            # What each segment should make, erring long: the engine holds a stream's first
            # audio until the rest can follow without a gap (runtime/admission.py).
            expected = [sizes.speech_seconds(text) for text in job.segments]
            eager = job.started.request.stream_start == "now"
            self.streams[job.job_id] = _Stream(job, clock=PlaybackClock(expected, eager))

    def clock(self, job_id: str) -> PlaybackClock | None:
        """The playback clock of a streamed job's listener (None: not streamed)."""
        stream = self.streams.get(job_id)
        return stream.clock if stream is not None else None

    @property
    def playing(self) -> int:
        """Streamed jobs in hand that have not sent their last chunk."""
        return sum(not s.drained.is_set() for s in self.streams.values())

    def from_engine(self, segment: Segment, samples: np.ndarray, final: bool) -> None:
        """The engines' ChunkSink: a piece of a segment's audio, handed over from the engine
        thread to the event loop."""
        assert self._loop is not None, "start the publisher first"
        self._loop.call_soon_threadsafe(self.feed, segment.job_id, segment.index, samples, final)

    def feed(self, job_id: str, segment: int, samples: np.ndarray, final: bool) -> None:
        """A piece of segment `segment` (0-based); `final`: the segment's last piece. Called on
        the event loop (the engine thread goes through `call_soon_threadsafe`)."""
        if job_id in self.streams:
            self._inbox.put_nowait((job_id, segment, samples, final))

    async def segment_out(self, job_id: str, index: int) -> None:
        """Wait until segment `index` is out (its `progress` event then follows its chunks), as
        long as `drained` would."""
        stream = self.streams.get(job_id)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(DRAIN_TIMEOUT_S):
                while stream is not None and stream.segment <= index:
                    if stream.drained.is_set():
                        return
                    stream.advanced.clear()
                    await stream.advanced.wait()

    async def drained(self, job_id: str) -> None:
        """Wait until every segment of the job is out (or its stream ended early); never longer
        than DRAIN_TIMEOUT_S: a stream that cannot go out must not hold up the result."""
        stream = self.streams.get(job_id)
        if stream is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(DRAIN_TIMEOUT_S):
                    await stream.drained.wait()

    def close(self, job_id: str) -> None:
        stream = self.streams.pop(job_id, None)
        if stream is not None:
            stream.drained.set()
            stream.advanced.set()

    async def _run(self) -> None:
        while True:
            job_id, segment, samples, final = await self._inbox.get()
            stream = self.streams.get(job_id)
            if stream is None or segment < stream.segment:
                continue  # closed, or a segment already out
            if segment > stream.segment:  # ahead of its turn: kept until the earlier ones end
                stream.waiting.setdefault(segment, []).append((samples, final))
                continue
            await self._publish(stream, samples, final)
            while stream.segment in stream.waiting and not stream.drained.is_set():
                for piece, last in stream.waiting.pop(stream.segment):
                    await self._publish(stream, piece, last)

    async def _publish(self, stream: _Stream, samples: np.ndarray, final: bool) -> None:
        if stream.drained.is_set():
            return
        # A later segment opens with the pause between segments (an empty one too, on its end).
        opens = stream.segment > 0 and stream.sent == 0
        last = final and stream.segment + 1 >= len(stream.job.segments)
        if samples.size or (final and opens) or last:  # the last one says so, empty or not
            piece = np.concatenate((self.gap, samples)) if opens else samples
            await self._send(stream, piece, last)
            stream.sent += samples.size
        if final:
            stream.segment += 1
            stream.sent = 0
            if stream.segment >= len(stream.job.segments):
                stream.drained.set()
            stream.advanced.set()

    async def _send(self, stream: _Stream, piece: np.ndarray, last: bool = False) -> None:
        job = stream.job
        pcm = audio.encode(piece, self.rate, "pcm")
        try:
            verdict = await self.queue.work.chunk(
                job.job_id,
                job.started.token,
                stream.published + 1,
                stream.segment + 1,
                pcm,
                piece.size / self.rate,
                last,
            )
        except RedisError as exc:  # the job goes on; its listeners get the rest at its end
            log.warning(
                "job %s: a chunk was not stored (%s)", job.job_id, exc, extra={"job_id": job.job_id}
            )
            stream.drained.set()
            return
        if verdict == "lost":
            job.lose()
            stream.drained.set()
            stream.advanced.set()
            return
        if verdict == "full":  # it outgrew the bytes streams may keep in Redis: it stops
            job.stop(
                "the stream's audio outgrew the room streams have in Redis "
                "(CHATTTS_STREAM_CHUNK_BYTES, shared by every client's streams)"
            )
            stream.drained.set()
            stream.advanced.set()
            return
        if verdict == "cancel":
            job.stop()
        stream.published += 1
        gap = stream.clock.sent(piece.size / self.rate)
        if gap > 0 and self.on_gap is not None:
            self.on_gap(gap)
