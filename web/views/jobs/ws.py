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
import logging
from typing import Any

from aiohttp import web

from web import job_service
from web.appkeys import QUEUE, SETTINGS, THROUGHPUT
from web.clients.identity import is_admin
from web.clients.limits import stream_lease
from web.errors import ApiError, dumps, job_not_found, redis_unavailable
from web.intake.door import Who
from web.replies.job_frames import JobFrames
from web.replies.sockets import Socket, json_frame, opened, unknown_op
from web.schemas.jobs import idempotency_key, valid_cursor, valid_job_id

log = logging.getLogger("chattts_online.web.ws")

# Ops that need Redis: while the store is known to be down they are refused at once.
STORE_OPS = frozenset({"submit", "subscribe", "cancel"})
OPS = ("submit", "subscribe", "unsubscribe", "cancel", "ping")
SLOW = "too slow: reconnect and resubscribe from your last event id"


async def websocket(request: web.Request) -> web.StreamResponse:
    async with opened(request, stream_lease(request)) as ws:  # refused before: a plain 429
        await Session(request, ws).run_session()
    return ws


class Session(Socket):
    """One socket: its ops answered each (never throttled: each carries its `ref`), one
    follower per job, their frames keyed by job (an unsubscribed job's queued frames dropped)."""

    def __init__(self, request: web.Request, ws: web.WebSocketResponse) -> None:
        super().__init__(request, ws, SLOW, throttle_errors=False)
        self.admin = is_admin(request)
        self.subs: dict[str, asyncio.Task[None]] = {}

    async def run_session(self) -> None:
        await self.run(self._handle, self._binary)

    async def stopped(self) -> None:
        tasks = list(self.subs.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def put(self, frame: dict[str, Any], key: str | None = None) -> None:
        """Queue a JSON frame; waits while the queue is full, up to stall_s (SlowReader)."""
        await self.send(dumps(frame), key=key)

    async def _binary(self) -> None:
        error = ApiError(400, "send JSON text frames", code="binary_not_accepted")
        await self.put({"type": "error", "ref": None, "error": error.error()})

    async def _handle(self, data: str) -> None:
        ref: Any = None

        async def work() -> None:
            nonlocal ref
            msg = json_frame(data)
            ref = msg.get("ref")
            await self._op(msg, ref)

        await self.answered(
            work(), lambda error: self.put({"type": "error", "ref": ref, "error": error.error()})
        )

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
            job_id = _job_id(msg)
            task = self.subs.pop(job_id, None)
            if task is not None:
                task.cancel()
            self.drop(job_id)  # its frames not yet sent, too
        elif op == "cancel":
            job_id = _job_id(msg)
            state = await job_service.cancel(self.app, job_id, "" if self.admin else self.client)
            await self.put({"type": "cancel", "ref": ref, "job_id": job_id, "state": state})
        else:
            raise unknown_op(op, OPS)

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
        task = asyncio.create_task(JobFrames(self, job_id, audio).follow(cursor))
        self.subs[job_id] = task

        def done(t: asyncio.Task[None]) -> None:
            if self.subs.get(job_id) is t:
                del self.subs[job_id]

        task.add_done_callback(done)


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
