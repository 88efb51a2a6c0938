"""Jobs: submit (`POST /v1/tts/jobs`), list mine, read its status, cancel it
(web/job_service.py)."""

from __future__ import annotations

from aiohttp import web

from core.queue.job import JobState
from web import job_service
from web.appkeys import QUEUE
from web.clients.identity import client_id, is_admin, new_client_token
from web.errors import ApiError, json_response
from web.intake.bodies import json_body
from web.intake.door import who
from web.schemas.answers import Cancelling, JobPage, JobView
from web.schemas.jobs import (
    DEFAULT_LIST_LIMIT,
    MAX_LIST_LIMIT,
    idempotency_key,
    valid_cursor,
)


async def create_job(request: web.Request) -> web.Response:
    idem = idempotency_key(request.headers.get("Idempotency-Key"))
    payload = await json_body(request)
    body = await job_service.submit(request.app, who(request), payload, idem)
    token = new_client_token(request)
    if token is not None:  # a script without cookies: how it stays this client (identity.py)
        body["client_token"] = token
    return json_response(body, status=202, headers={"Location": body["status_url"]})


async def list_jobs(request: web.Request) -> web.Response:
    """`GET /v1/tts/jobs?state=&limit=&cursor=`: the caller's own jobs, newest first."""
    query = request.query
    states = frozenset(s for s in query.get("state", "").split(",") if s)
    unknown = states - {state.value for state in JobState}
    if unknown:
        names = ", ".join(state.value for state in JobState)
        raise ApiError(
            400,
            f"unknown state {sorted(unknown)[0]!r}: 'state' is one or more of {names}",
            code="invalid_state",
            param="state",
        )
    raw_limit = query.get("limit", str(DEFAULT_LIST_LIMIT))
    if (
        not (raw_limit.isascii() and raw_limit.isdigit())
        or not 1 <= int(raw_limit) <= MAX_LIST_LIMIT
    ):
        raise ApiError(
            400,
            f"'limit' must be a whole number from 1 to {MAX_LIST_LIMIT}",
            code="invalid_limit",
            param="limit",
        )
    cursor = valid_cursor(query.get("cursor"), "cursor")  # the next_cursor of the page before
    found, next_cursor = await job_service.my_jobs(
        request.app, client_id(request), states, int(raw_limit), cursor
    )
    page: JobPage = {"jobs": found, "next_cursor": next_cursor}
    return json_response(page)


async def get_job(request: web.Request) -> web.Response:
    job = await job_service.get(request.app, request.match_info["job_id"])
    links = job_service.job_urls(request.app, job.id)
    # (mypy asks the ** items for the keys that a queued job's view adds below, too.)
    body: JobView = {**job.public(), **links}  # type: ignore[typeddict-item]
    if job.state == "queued":
        ahead = await request.app[QUEUE].position(job)
        body["position"] = ahead
        body["estimated_start_s"] = job_service.estimated_start(request.app, ahead)
    return json_response(body)


async def delete_job(request: web.Request) -> web.Response:
    job_id = request.match_info["job_id"]
    client = "" if is_admin(request) else client_id(request)
    body: Cancelling = {
        "id": job_id,
        "state": await job_service.cancel(request.app, job_id, client),
    }
    return json_response(body, status=202)
