"""Jobs: submit (`POST /v1/tts/jobs`), read its status, cancel it. Shared with the WebSocket."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from core.audio.documents import DOCUMENT_FORMATS
from core.queue.job import SynthesisRequest
from core.queue.store import BacklogFull, ClientCapReached, QueueError, Submitted
from web.appkeys import METRICS, QUEUE, SETTINGS, THROUGHPUT
from web.clients.identity import client_id, is_admin
from web.clients.limits import check_submit
from web.errors import ApiError, json_response, not_found
from web.monitors.store import DEFAULT_S
from web.schemas.jobs import (
    callback_url,
    idempotency_key,
    job_urls,
    json_body,
    position,
    synthesis_request,
    valid_job_id,
)


def retry_after_s(exc: QueueError, app: web.Application | None = None) -> int:
    """How long a refused client should wait, from the queue's measured throughput (pass the
    app: without it, a fixed guess). See web/monitors/store.py."""
    meter = app.get(THROUGHPUT) if app is not None else None
    if meter is None:
        return DEFAULT_S if isinstance(exc, BacklogFull | ClientCapReached) else 1
    if isinstance(exc, BacklogFull):
        return meter.retry_after(exc.depth)
    if isinstance(exc, ClientCapReached):
        return meter.retry_after(share=exc.active)
    return 1


def _refusal(app: web.Application, exc: QueueError) -> ApiError:
    headers = {"Retry-After": str(retry_after_s(exc, app))}
    return ApiError(exc.status, str(exc), code=exc.code, headers=headers)


async def submit_job(
    app: web.Application,
    client: str,
    payload: Any,
    idem: str | None = None,
    **fixed: Any,
) -> dict[str, Any]:
    """Validate and enqueue; the body of the 202 (with `"duplicate": true` for a repeat)."""
    queue = app[QUEUE]
    callback = None
    if isinstance(payload, dict):
        payload = dict(payload)
        callback = callback_url(payload, app[SETTINGS].callback_allow)
    settings = app[SETTINGS]
    request = await synthesis_request(
        queue, payload, settings.max_text_chars, settings.max_document_chars, **fixed
    )
    document = len(request.text) > settings.max_text_chars
    if document:
        check_document(request, settings.max_text_chars)
    if request.priority == "high" and not client.startswith("key-"):
        raise ApiError(
            403,
            "'priority': 'high' is for clients with an API key (CHATTTS_API_KEYS); anyone else "
            "would jump the queue of everyone: leave it out",
            code="priority_not_allowed",
            param="priority",
        )
    try:
        submitted = await queue.enqueue(
            request, client, idem, callback_url=callback, document=document
        )
    except QueueError as exc:
        raise _refusal(app, exc) from None
    if not submitted.duplicate:
        app[METRICS].jobs_submitted.inc()
    return await submitted_body(app, submitted)


def check_document(request: SynthesisRequest, max_text_chars: int) -> None:
    """A job past CHATTTS_MAX_TEXT_CHARS is a document: kept in parts and served joined from
    them (core/audio/documents.py), so its file is wav or pcm, and it is not streamed."""
    if request.format not in DOCUMENT_FORMATS:
        raise ApiError(
            422,
            f"a text of more than {max_text_chars} characters is a document, delivered as wav "
            f"or pcm (its audio is joined from its parts as it is downloaded): not "
            f"{request.format!r}. Convert the WAV afterwards, or send shorter jobs",
            code="document_format",
            param="format",
        )
    if request.stream:
        raise ApiError(
            422,
            f"a text of more than {max_text_chars} characters is a document: follow its "
            "progress events and fetch its audio when it ends ('stream': true is for shorter "
            "jobs)",
            code="document_stream",
            param="stream",
        )


async def submitted_body(app: web.Application, submitted: Submitted) -> dict[str, Any]:
    """The job's snapshot with the cursor of the very event it comes from (consistent pair)."""
    queue = app[QUEUE]
    job_id = submitted.job_id
    if submitted.event is not None:  # a new job: the enqueue script returned all we need
        return _body(
            app,
            job_id,
            submitted.event_id,
            submitted.event["job"],
            submitted.seq,
            submitted.started_seq,
            submitted.duplicate,
        )
    # A duplicate has no event of its own: the latest event says where the job stands.
    event, seq, started = await queue.where(job_id, submitted.event_id)
    cursor: str | None = None
    if event is not None:
        cursor = event[0]
        snapshot: dict[str, Any] = event[1]["job"]
    else:  # events trimmed or expired: the hash alone
        job = await queue.get(job_id)
        snapshot = job.public() if job else {"id": job_id, "state": "expired"}
    return _body(app, job_id, cursor, snapshot, seq, started, submitted.duplicate)


def _body(
    app: web.Application,
    job_id: str,
    cursor: str | None,
    snapshot: dict[str, Any],
    seq: int,
    started_seq: int,
    duplicate: bool,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": job_id,
        "state": snapshot.get("state"),
        **job_urls(app, job_id),
        "events_cursor": cursor,
        "position": position(snapshot, seq, started_seq),
        "job": snapshot,
    }
    if duplicate:
        body["duplicate"] = True
    return body


async def create_job(request: web.Request) -> web.Response:
    idem = idempotency_key(request.headers.get("Idempotency-Key"))
    payload = await json_body(request)
    await check_submit(request)
    body = await submit_job(request.app, client_id(request), payload, idem)
    return json_response(body, status=202, headers={"Location": body["status_url"]})


async def get_job(request: web.Request) -> web.Response:
    queue = request.app[QUEUE]
    job_id = valid_job_id(request.match_info["job_id"])
    job = await queue.get(job_id)
    if job is None:
        raise not_found(f"no job with id {job_id!r} (unknown, or expired)", "job_not_found")
    body = {**job.public(), **job_urls(request.app, job_id)}
    if job.state == "queued":
        body["position"] = await queue.position(job)
    return json_response(body)


async def cancel(app: web.Application, job_id: str, client: str) -> str:
    """Cancel `client`'s job ("": an admin's, any job): 'cancelled' (it never ran) or
    'cancelling' (it stops at its next boundary). Reading a job by id is open (ids are
    capability URLs); ending it is its owner's."""
    verdict, state = await app[QUEUE].cancel(valid_job_id(job_id), client)
    if verdict == "missing":
        raise not_found(f"no job with id {job_id!r} (unknown, or expired)", "job_not_found")
    if verdict == "forbidden":
        raise ApiError(
            403,
            f"job {job_id} was submitted by another client; only the client that submitted it "
            "(the same API key, or the same browser's cookie) may cancel it",
            code="not_job_owner",
        )
    if verdict == "terminal":
        raise ApiError(
            409,
            f"job {job_id} already ended ({state}); there is nothing to cancel",
            code="job_finished",
            extra={"state": state},
        )
    return verdict


async def delete_job(request: web.Request) -> web.Response:
    job_id = request.match_info["job_id"]
    state = await cancel(request.app, job_id, "" if is_admin(request) else client_id(request))
    return json_response({"id": job_id, "state": state}, status=202)
