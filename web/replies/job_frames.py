"""One job followed over a WebSocket: its events as frames, in order, each once, with its audio
when asked (each segment's file, or a streaming job's PCM chunks, a header and its binary frame
adjacent); its frames keyed by the job, so that unsubscribing drops what was not yet sent."""

from __future__ import annotations

import contextlib
import time
from typing import Any

from core.audio.documents import BYTES_PER_SAMPLE
from core.audio.formats import SAMPLE_RATE
from web.appkeys import HUB, MEMORY, METRICS, QUEUE
from web.errors import dumps
from web.following import ChunkReader, Restarted
from web.hub import follow
from web.replies.sockets import SlowReader, Socket


class JobFrames:
    """A job's frames over `socket`; `audio`: its audio besides its events."""

    def __init__(self, socket: Socket, job_id: str, audio: bool) -> None:
        self.socket, self.job_id, self.audio = socket, job_id, audio

    async def _frame(self, frame: dict[str, Any]) -> None:
        await self.socket.send(dumps(frame), key=self.job_id)

    async def put_audio(self, header: dict[str, Any], data: bytes, reserved: bool = False) -> None:
        """Queue an audio header and its binary frame as one item (never split by other frames).
        Its bytes count in the process's memory budget until sent (`reserved`: they do already):
        a client that subscribes to many jobs and reads slowly waits its turn, then is closed."""
        await self.socket.send(dumps(header), data, self.job_id, len(data), held=reserved)

    async def follow(self, cursor: str | None) -> None:
        """Its events from `cursor` on (null: from the start) until its terminal one."""
        job_id, audio = self.job_id, self.audio
        queue = self.socket.app[QUEUE]
        stream = queue.keys.job_events(job_id)
        segments_sent = False
        chunks: ChunkReader | None = ChunkReader(self.socket.app, job_id) if audio else None
        subscribed_ms = int(time.time() * 1000)
        try:
            async with contextlib.aclosing(
                follow(queue, self.socket.app[HUB], stream, cursor, job_id=job_id)
            ) as events:
                async for stream_id, event in events:
                    frame = {"type": "event", "job_id": job_id, "id": stream_id, "event": event}
                    await self._frame(frame)
                    self.socket.app[METRICS].event_sent("ws", stream_id, subscribed_ms)
                    if chunks is not None and (chunks.sent or event.get("type") == "audio"):
                        if not await self._chunks(chunks, event):
                            audio, chunks = False, None  # restarted: no more audio frames
                    elif audio:
                        segments_sent |= await self._audio(job_id, event, segments_sent)
        except SlowReader:
            return  # the socket is being closed

    async def _chunks(self, reader: ChunkReader, event: dict[str, Any]) -> bool:
        """The PCM chunks a streaming job's event makes available, each a header and its binary
        frame; False once the job restarted after its audio began (an error frame says so, the
        events go on, and no audio of the new attempt is spliced on)."""
        try:
            async with contextlib.aclosing(reader.on_event(event)) as batches:
                async for chunks in batches:
                    first = reader.sent - len(chunks)
                    for n, data in enumerate(chunks, start=first + 1):
                        header = {
                            "type": "audio",
                            "job_id": reader.job_id,
                            "chunk": n,
                            "format": "pcm",
                            "bytes": len(data),
                            "final": False,
                        }
                        await self.put_audio(header, bytes(data))
        except Restarted as exc:
            error = {"type": "error", "ref": None, "job_id": reader.job_id, "error": exc.error()}
            await self._frame(error)
            return False
        return True

    async def _audio(self, job_id: str, event: dict[str, Any], segments_sent: bool) -> bool:
        """Send the audio an event announces; True when it was a segment's."""
        queue = self.socket.app[QUEUE]
        kind = event.get("type")
        job = event.get("job") or {}
        segment = event.get("segment") or {}
        total = int(segment.get("total") or job.get("segments_total") or 1)
        index, final = int(segment.get("index") or 0), False
        # Reserved before the fetch: a dozen subscriptions never hold a dozen files while they
        # wait for the client. A segment is at most PCM's size (every format here is smaller).
        if kind == "progress" and total > 1 and index >= 1:
            expected = (
                int(float(segment.get("duration_s") or 0) * SAMPLE_RATE * BYTES_PER_SAMPLE) + 4096
            )
        elif kind == "succeeded" and not segments_sent:
            index, final = total, True
            expected = int(job.get("audio_size") or 0)
        else:
            return False
        memory, where = self.socket.app[MEMORY], self.socket.source
        await self.socket.reserve(expected)
        try:
            if final:
                data: Any = await queue.stored.file(job_id)
            else:
                data = await queue.stored.segment(job_id, index)
        except BaseException:
            memory.give(where, expected)
            raise
        if not data:
            memory.give(where, expected)
            return False
        memory.resize(where, expected, len(data))
        header = {
            "type": "audio",
            "job_id": job_id,
            "segment": index,
            "total": total,
            "format": job.get("format"),
            "bytes": len(data),
            "final": final,
        }
        await self.put_audio(header, bytes(data), reserved=True)
        return not final
