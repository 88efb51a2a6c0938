"""The seed-era API, kept for old clients with its exact shapes (FastAPI's, which it was built on).

    POST /tts/submit {"text": "...", "voice": "zh_female"}  -> 200 {"task_id": id, "estimate": ms}
    GET  /tts/query/{task_id} -> {"status": "PENDING"} | {"status": "DONE", "audio": <base64 WAV>}

Additions, which old clients never saw from the old service: `{"status": "FAILED", "error": "..."}`
for a job that failed, was cancelled or dead-lettered (the old service kept answering PENDING
forever), and 404 `{"detail": ...}` for an unknown or expired task id (the same). Validation errors
are 422 `{"detail": [{"type", "loc": ["body", field], "msg", "input", ...}]}` as FastAPI wrote them.
Jobs submitted here are always WAV and run on the same queue as every other job.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import orjson
from aiohttp import web
from pydantic import ValidationError

from core.queue.job import JobState, is_job_id, legacy_job_id
from web.appkeys import QUEUE, SETTINGS
from web.errors import ApiError, json_response, not_found
from web.intake.bodies import read_body
from web.intake.door import Policy, admit, who
from web.intake.submissions import clean
from web.replies.sending import holding, send_bytes
from web.schemas.compat_answers import LegacyStatus, LegacySubmitted, LegacyValidationError
from web.schemas.legacy import MAX_CHARS, LegacyRequest, fastapi_detail

# Base64 of more than this runs in a thread, off the event loop.
_B64_ON_LOOP = 256 * 1024
_PENDING = (JobState.QUEUED, JobState.RUNNING)
# Its jobs: WAV, with a callback when asked (the seed design's), the text's limit its own.
_LEGACY = Policy(callbacks=True, max_chars=MAX_CHARS)


def _detail(errors: list[Any]) -> web.Response:
    body: LegacyValidationError = {"detail": fastapi_detail(errors)}
    return json_response(body, status=422)


def _too_long(text: str, limit: int) -> web.Response:
    return _detail(
        [
            {
                "type": "string_too_long",
                "loc": ("text",),
                "input": text,
                "msg": f"String should have at most {limit} characters",
                "ctx": {"max_length": limit},
            }
        ]
    )


def _json_only(request: web.Request) -> None:
    """JSON, or no Content-Type at all (old scripts post JSON without one). Forms and text/plain
    are what a page elsewhere can post without asking: never a legacy submit."""
    declared = request.headers.get("Content-Type")
    if declared is None:
        return
    kind = request.content_type
    if kind != "application/json" and not kind.endswith("+json"):
        raise ApiError(
            415,
            f"send the task as JSON (Content-Type: application/json); got {kind!r}",
            code="unsupported_media_type",
        )


async def submit(request: web.Request) -> web.Response:
    _json_only(request)
    raw = await read_body(request)
    try:
        payload = orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError as exc:
        return _detail(
            [
                {
                    "type": "json_invalid",
                    "loc": (0,),
                    "msg": "JSON decode error",
                    "input": {},
                    "ctx": {"error": str(exc)},
                }
            ]
        )
    if payload is None:
        return _detail([{"type": "missing", "loc": (), "msg": "Field required", "input": None}])
    # The limit holds for the text as sent (the API document's) and once cleaned: the old limit
    # of 500, or a server's lower CHATTTS_MAX_TEXT_CHARS.
    limit = min(MAX_CHARS, request.app[SETTINGS].limits.max_text_chars)
    if isinstance(payload, dict) and isinstance(payload.get("text"), str):
        if len(payload["text"]) > limit:
            return _too_long(payload["text"], limit)
        payload = {**payload, "text": await clean(payload["text"])}
    try:
        legacy = LegacyRequest.model_validate(payload)
    except ValidationError as exc:
        return _detail(exc.errors(include_url=False))
    job: dict[str, Any] = {"text": legacy.text, "voice": legacy.voice, "format": "wav"}
    if legacy.callback_url is not None:
        job["callback_url"] = legacy.callback_url
    try:
        async with admit(request.app, who(request), job, _LEGACY) as admitted:
            submitted = admitted.submitted
    except ApiError as exc:
        if exc.status != 422:
            raise
        # A refusal of the request itself, in FastAPI's shape as the old service wrote it.
        param = exc.param or "text"
        error = {"type": "value_error", "loc": (param,), "msg": exc.message, "ctx": {}}
        return _detail([{**error, "input": job.get(param)}])
    # The old service always said 500 ms; ours grows with the jobs ahead (the depth comes with
    # the enqueue script's answer: one round trip per submit).
    estimate = 500 + 250 * max(0, submitted.depth - 1)
    answer: LegacySubmitted = {"task_id": submitted.job_id, "estimate": estimate}
    return json_response(answer)


async def query(request: web.Request) -> web.StreamResponse:
    task_id = legacy_job_id(request.match_info["task_id"])
    queue = request.app[QUEUE]
    job = await queue.get(task_id) if is_job_id(task_id) else None
    if job is None:
        raise not_found("task not found (unknown, or expired)")
    status: LegacyStatus
    if job.state in _PENDING:
        status = {"status": "PENDING"}
        return json_response(status)
    if job.state != JobState.SUCCEEDED:
        status = {"status": "FAILED", "error": job.error or job.state.value}
        return json_response(status)
    # The file, its base64 (a third more) and the answer: counted before the fetch.
    with holding(request, (job.audio_size or 0) * 3):
        audio = await queue.stored.file(job.id)
        if audio is None:
            raise not_found("the audio of this task expired")
        if len(audio) > _B64_ON_LOOP:
            encoded = await asyncio.to_thread(base64.b64encode, audio)
        else:
            encoded = base64.b64encode(audio)
        # LegacyStatus DONE, written as bytes: base64 needs no JSON escaping.
        body = b'{"status":"DONE","audio":"' + encoded + b'"}'
        headers = {"Content-Type": "application/json; charset=utf-8"}
        return await send_bytes(request, body, headers)
