"""`GET /v1/ws`: one WebSocket that submits, subscribes, unsubscribes and cancels jobs.

Client -> server (JSON text frames):
    {"op": "submit", "ref": any, "request": {...SynthesisRequest...}, "idempotency_key"?: str,
     "audio"?: bool}
    {"op": "subscribe", "job_id": str, "after": cursor | null, "audio"?: bool}
    {"op": "unsubscribe", "job_id": str}
    {"op": "cancel", "ref"?: any, "job_id": str}
    {"op": "ping"}
Server -> client:
    {"type": "submitted", "ref", "job": <the body of POST /v1/tts/jobs' 202>}  (auto-subscribed)
    {"type": "event", "job_id", "id": <stream id>, "event": {...}}
    {"type": "cancel", "ref", "job_id", "state": "cancelled" | "cancelling"}
    {"type": "error", "ref", "error": {"message", "type", "param", "code"}}
    {"type": "pong", "ref"}
    {"type": "audio", "job_id", "segment", "total", "format", "bytes", "final"}, then one binary
        frame of exactly `bytes` bytes (only with "audio": true; see below)
With "audio": true, each `progress` event frame of a job of several segments is followed by that
segment's encoded audio (a complete file of the job's format: segment `segment` of `total`,
"final": false); after `succeeded`, when no segment was sent (a one-segment job, or a result
from the cache), the job's whole file follows ("final": true). A job submitted with "stream": true
sends its audio as it is synthesized instead: each `audio` event frame is followed by its chunk
(`{"type": "audio", "job_id", "chunk": n, "format": "pcm", "bytes", "final": false}`: 16-bit PCM
at 24 kHz; the chunks, pauses between segments included, join into the job's samples). The
header and its binary frame are always adjacent, whatever other jobs the socket follows.
Events of one job arrive in order, each once, replayed from `after` (null: from the start); a
subscription ends after the job's terminal event. Frames go through a bounded per-socket queue: a
client that stops reading is disconnected (close code 1013) and resumes by cursor.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

import orjson
from aiohttp import WSCloseCode, WSMsgType, web

from core.audio.documents import BYTES_PER_SAMPLE
from core.audio.formats import SAMPLE_RATE
from core.infra.redis_client import REDIS_DOWN
from web import job_service
from web.appkeys import (
    CONNECTIONS,
    EGRESS,
    HUB,
    MEMORY,
    METRICS,
    QUEUE,
    SETTINGS,
    THROUGHPUT,
)
from web.clients.identity import client_id, is_admin
from web.clients.limits import stream_lease
from web.errors import ApiError, dumps, job_not_found, redis_unavailable
from web.following import ChunkReader, Restarted
from web.hub import follow
from web.intake.door import Who
from web.middlewares.origin import check_websocket_origin
from web.monitors.memory import address
from web.replies.sending import send_timeout_s
from web.schemas.jobs import idempotency_key, valid_cursor, valid_job_id

log = logging.getLogger("chattts_online.web.ws")

# Ops that need Redis: while the store is known to be down they are refused at once.
STORE_OPS = frozenset({"submit", "subscribe", "cancel"})
OPS = ("submit", "subscribe", "unsubscribe", "cancel", "ping")


class SlowConsumer(Exception):
    pass


async def websocket(request: web.Request) -> web.StreamResponse:
    check_websocket_origin(request)
    settings = request.app[SETTINGS]
    async with stream_lease(request):  # refused before the upgrade: a plain 429
        ws = web.WebSocketResponse(
            heartbeat=max(1.0, settings.web.sse_ping_s), max_msg_size=settings.limits.max_body_bytes
        )
        await ws.prepare(request)
        connections, metrics = request.app[CONNECTIONS], request.app[METRICS]
        connections.ws.add(ws)
        metrics.ws_open.inc()
        try:
            await Session(request, ws).run()
        finally:
            connections.ws.discard(ws)
            metrics.ws_open.dec()
    return ws


class Session:
    """One socket: a reader (ops), a writer (the bounded frame queue), one follower per job."""

    def __init__(self, request: web.Request, ws: web.WebSocketResponse) -> None:
        self.app = request.app
        self.ws = ws
        self.request = request
        self.client = client_id(request)
        self.source = address(request)  # whose memory budget this socket's audio counts in
        self.admin = is_admin(request)
        # Text frames (JSON), and audio: a JSON header and its binary frame, sent back to back.
        self.out: asyncio.Queue[str | bytes | tuple[str, bytes]] = asyncio.Queue(
            self.app[SETTINGS].web.connection_queue_size
        )
        self.subs: dict[str, asyncio.Task[None]] = {}
        # A frame that cannot enter the queue this long means the client stopped reading: the
        # same write timeout as SSE (two ping periods, 10 s at most).
        self.stall_s = send_timeout_s(self.app[SETTINGS].web.sse_ping_s)

    async def run(self) -> None:
        writer = asyncio.create_task(self._writer())
        try:
            async for msg in self.ws:
                if msg.type == WSMsgType.TEXT:
                    await self._handle(msg.data)
                elif msg.type == WSMsgType.BINARY:
                    error = ApiError(400, "send JSON text frames", code="binary_not_accepted")
                    await self.put({"type": "error", "ref": None, "error": error.error()})
        except SlowConsumer:
            await self._close_slow()
        finally:
            # Shielded: the server cancels a handler whose client went away, and the audio
            # queued for it must leave the memory budget all the same.
            await asyncio.shield(self._stop([writer, *self.subs.values()]))

    async def _stop(self, tasks: list[asyncio.Task[None]]) -> None:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        while not self.out.empty():  # audio never sent: its bytes leave the budget
            frame = self.out.get_nowait()
            if isinstance(frame, tuple):
                self.app[MEMORY].give(self.source, len(frame[1]))

    async def put(self, frame: dict[str, Any] | bytes) -> None:
        """Queue a JSON frame (or raw bytes); waits while the queue is full, up to stall_s."""
        try:
            async with asyncio.timeout(self.stall_s):
                await self.out.put(frame if isinstance(frame, bytes) else dumps(frame))
        except TimeoutError:
            raise SlowConsumer from None

    async def put_audio(self, header: dict[str, Any], data: bytes, reserved: bool = False) -> None:
        """Queue an audio header and its binary frame as one item (never split by other frames).
        Its bytes count in the process's memory budget until sent (`reserved`: they do already):
        a client that subscribes to many jobs and reads slowly waits its turn, then is closed."""
        if not reserved:
            await self.reserve(len(data))
        try:
            async with asyncio.timeout(self.stall_s):
                await self.out.put((dumps(header), data))
        except BaseException as exc:
            self.app[MEMORY].give(self.source, len(data))
            if isinstance(exc, TimeoutError):
                raise SlowConsumer from None
            raise

    async def reserve(self, size: int) -> None:
        try:
            await self.app[MEMORY].wait_take(
                self.source, size, "audio for this WebSocket", self.stall_s
            )
        except ApiError:
            raise SlowConsumer from None

    async def _writer(self) -> None:
        while True:
            frame = await self.out.get()
            if isinstance(frame, tuple):
                try:
                    await self.ws.send_str(frame[0])
                    await self.app[EGRESS].pace(self.source, len(frame[1]))
                    await self.ws.send_bytes(frame[1])
                finally:
                    self.app[MEMORY].give(self.source, len(frame[1]))
            elif isinstance(frame, bytes):
                await self.app[EGRESS].pace(self.source, len(frame))
                await self.ws.send_bytes(frame)
            else:
                await self.ws.send_str(frame)

    async def _close_slow(self) -> None:
        with contextlib.suppress(Exception):
            await self.ws.close(
                code=WSCloseCode.TRY_AGAIN_LATER,
                message=b"too slow: reconnect and resubscribe from your last event id",
            )

    async def _handle(self, data: str) -> None:
        ref: Any = None
        try:
            try:
                msg = orjson.loads(data)
            except orjson.JSONDecodeError as exc:
                message = f"the frame is not valid JSON: {exc}"
                raise ApiError(400, message, code="invalid_json") from None
            if not isinstance(msg, dict):
                raise ApiError(400, "a frame must be a JSON object", code="invalid_message")
            ref = msg.get("ref")
            await self._op(msg, ref)
        except ApiError as exc:
            await self.put({"type": "error", "ref": ref, "error": exc.error()})
        except REDIS_DOWN:
            await self.put({"type": "error", "ref": ref, "error": redis_unavailable().error()})
        except SlowConsumer:
            raise
        except Exception:
            log.exception("WebSocket frame failed")
            error = ApiError(500, "internal error; it was logged", code="internal_error")
            await self.put({"type": "error", "ref": ref, "error": error.error()})

    async def _op(self, msg: dict[str, Any], ref: Any) -> None:
        op = msg.get("op")
        meter = self.app.get(THROUGHPUT)
        # (An op that is no string, a list say, is an unknown op below, not a lookup's error.)
        if isinstance(op, str) and op in STORE_OPS and meter is not None and meter.store_down:
            raise redis_unavailable()  # known down: say so now, not after a socket timeout
        if op == "ping":
            await self.put({"type": "pong", "ref": ref})
        elif op == "submit":
            idem = msg.get("idempotency_key")
            if idem is not None and not isinstance(idem, str):
                raise ApiError(
                    400, "'idempotency_key' must be a string", code="invalid_idempotency_key"
                )
            request = msg.get("request")
            if request is None:
                raise ApiError(422, "'request' is required", code="missing_field", param="request")
            audio = _audio_flag(msg)
            by = Who(self.client, self.source)
            body = await job_service.submit(self.app, by, request, idempotency_key(idem))
            await self.put({"type": "submitted", "ref": ref, "job": body})
            self._subscribe(body["id"], None, audio)
        elif op == "subscribe":
            job_id = _job_id(msg)
            after = msg.get("after")
            if after is not None and not isinstance(after, str):
                raise ApiError(400, "'after' must be an event id or null", code="invalid_cursor")
            cursor = valid_cursor(after, "after")
            audio = _audio_flag(msg)
            queue = self.app[QUEUE]
            if await queue.state(job_id) is None:
                raise job_not_found(job_id)
            self._subscribe(job_id, cursor, audio)
        elif op == "unsubscribe":
            task = self.subs.pop(_job_id(msg), None)
            if task is not None:
                task.cancel()
        elif op == "cancel":
            job_id = _job_id(msg)
            state = await job_service.cancel(self.app, job_id, "" if self.admin else self.client)
            await self.put({"type": "cancel", "ref": ref, "job_id": job_id, "state": state})
        else:
            raise ApiError(
                400,
                f"unknown op {op!r}; the ops are {', '.join(OPS)}",
                code="unknown_op",
                param="op",
            )

    def _subscribe(self, job_id: str, cursor: str | None, audio: bool = False) -> None:
        if job_id in self.subs:
            return  # already following it: its events keep coming, once each
        cap = self.app[SETTINGS].limits.ws_subscriptions
        if len(self.subs) >= cap:
            raise ApiError(
                429,
                f"at most {cap} subscriptions per socket; unsubscribe some",
                code="too_many_subscriptions",
            )
        task = asyncio.create_task(self._follow(job_id, cursor, audio))
        self.subs[job_id] = task

        def done(t: asyncio.Task[None]) -> None:
            if self.subs.get(job_id) is t:
                del self.subs[job_id]

        task.add_done_callback(done)

    async def _follow(self, job_id: str, cursor: str | None, audio: bool) -> None:
        queue = self.app[QUEUE]
        stream = queue.keys.job_events(job_id)
        segments_sent = False
        chunks: ChunkReader | None = ChunkReader(self.app, job_id) if audio else None
        subscribed_ms = int(time.time() * 1000)
        try:
            async with contextlib.aclosing(
                follow(queue, self.app[HUB], stream, cursor, job_id=job_id)
            ) as events:
                async for stream_id, event in events:
                    frame = {"type": "event", "job_id": job_id, "id": stream_id, "event": event}
                    await self.put(frame)
                    self.app[METRICS].event_sent("ws", stream_id, subscribed_ms)
                    if chunks is not None and (chunks.sent or event.get("type") == "audio"):
                        if not await self._chunks(chunks, event):
                            audio, chunks = False, None  # restarted: no more audio frames
                    elif audio:
                        segments_sent |= await self._audio(job_id, event, segments_sent)
        except SlowConsumer:
            await self._close_slow()

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
            await self.put(error)
            return False
        return True

    async def _audio(self, job_id: str, event: dict[str, Any], segments_sent: bool) -> bool:
        """Send the audio an event announces; True when it was a segment's."""
        queue = self.app[QUEUE]
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
        memory, where = self.app[MEMORY], self.source
        await self.reserve(expected)
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


def _audio_flag(msg: dict[str, Any]) -> bool:
    audio = msg.get("audio", False)
    if not isinstance(audio, bool):
        raise ApiError(400, "'audio' must be true or false", code="invalid_audio", param="audio")
    return audio


def _job_id(msg: dict[str, Any]) -> str:
    job_id = msg.get("job_id")
    if not isinstance(job_id, str):
        raise ApiError(400, "'job_id' must be a string", code="invalid_job_id", param="job_id")
    return valid_job_id(job_id)
