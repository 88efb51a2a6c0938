"""The console's jobs: search them, read one's whole record, and the dead letters (list, requeue
one or many, purge)."""

from __future__ import annotations

from typing import cast

from aiohttp import web

from web.appkeys import QUEUE
from web.clients.identity import shown_client
from web.clients.operators import require_operator
from web.errors import ApiError, job_not_found, json_response
from web.intake.bodies import json_body
from web.job_service import job_urls
from web.replies.console import dead_letter_view, listed_job
from web.schemas import admin as params
from web.schemas.console_answers import (
    ConsoleJobPage,
    DeadLetterPage,
    JobRecord,
    Purged,
    Requeue,
    Requeued,
    RequeueResults,
)
from web.schemas.jobs import valid_job_id


async def search_jobs(request: web.Request) -> web.Response:
    """GET /admin/v1/jobs: newest first, by state, client, voice, time and a text fragment."""
    require_operator(request)
    query = request.query
    states = params.states(query)
    client, voice = params.text(query, "client", 64), params.text(query, "voice", 64)
    limit = params.integer(query, "limit", 50, 1, params.MAX_PAGE)
    since = params.timestamp(query, "since")
    until = params.timestamp(query, "until")
    cursor = params.timestamp(query, "cursor")
    fragment = params.text(query, "text")

    def match(record: dict[str, str]) -> bool:
        return (
            (not states or record.get("state") in states)
            and (client is None or client in _names(record))
            and (voice is None or record.get("voice") == voice)
        )

    found, next_cursor = await request.app[QUEUE].console.search(
        match, limit, since, cursor if cursor is not None else until, fragment
    )
    page: ConsoleJobPage = {"jobs": [listed_job(r) for r in found], "next_cursor": next_cursor}
    return json_response(page)


def _names(record: dict[str, str]) -> tuple[str | None, ...]:
    """What a search's `client` may name a job's client by: as shown, or whom it is fair to."""
    return (shown_client(record.get("client", "")), record.get("who"))


async def job_record(request: web.Request) -> web.Response:
    """GET /admin/v1/jobs/{id}: every field, each start and its worker, the events, the
    callback's deliveries, the dead letter and the links to its audio."""
    require_operator(request)
    job_id = valid_job_id(request.match_info["job_id"])
    record = await request.app[QUEUE].console.record(job_id)
    if record is None:
        raise job_not_found(job_id)
    record["job"]["client"] = shown_client(record["job"].get("client", ""))
    if record["callback"]:
        record["callback"]["client"] = shown_client(str(record["callback"].get("client", "")))
    whole = cast(JobRecord, {**record, "links": job_urls(request.app, job_id)})
    return json_response(whole)


async def dead_letters(request: web.Request) -> web.Response:
    """GET /admin/v1/dlq: the newest first, with each one's reason and last worker."""
    require_operator(request)
    limit = params.integer(request.query, "limit", 50, 1, params.MAX_PAGE)
    cursor = params.entry_cursor(request.query)
    letters, next_cursor = await request.app[QUEUE].console.dead_letters(limit, cursor)
    page: DeadLetterPage = {
        "dead_letters": [dead_letter_view(letter) for letter in letters],
        "next_cursor": next_cursor,
    }
    return json_response(page)


async def _requeue(request: web.Request, job_id: str, by: str) -> Requeue:
    verdict, detail = await request.app[QUEUE].requeue(job_id, by)
    if verdict == "ok":
        return {"id": job_id, "requeued": True, "state": "queued", "events_cursor": detail}
    if verdict == "missing":
        return {"id": job_id, "requeued": False, "error": "job_not_found"}
    return {"id": job_id, "requeued": False, "error": "job_not_dead", "state": detail}


async def requeue_one(request: web.Request) -> web.Response:
    """POST /admin/v1/dlq/{id}/requeue: 200, or 404 / 409 when the job is gone or not dead."""
    by = require_operator(request)
    job_id = valid_job_id(request.match_info["job_id"])
    result = await _requeue(request, job_id, by)
    if result.get("error") == "job_not_found":
        raise job_not_found(job_id)
    if result.get("error") == "job_not_dead":
        raise ApiError(
            409,
            f"job {job_id} is {result['state']}, not dead: only a dead job is requeued (a "
            "second requeue finds the first one's job queued or running)",
            code="job_not_dead",
            state=result["state"],
        )
    requeued: Requeued = {**result, **job_urls(request.app, job_id)}
    return json_response(requeued)


async def requeue_many(request: web.Request) -> web.Response:
    """POST /admin/v1/dlq/requeue {"ids": [...]} or {"all": true}: each one's outcome."""
    by = require_operator(request)
    ids = params.job_ids(await json_body(request))
    more = False
    if ids is None:  # the newest MAX_IDS at a time: `more` says whether to ask again
        letters, cursor = await request.app[QUEUE].console.dead_letters(params.MAX_IDS)
        ids, more = list(dict.fromkeys(letter.job_id for letter in letters)), cursor is not None
    results = [await _requeue(request, job_id, by) for job_id in ids]
    outcome: RequeueResults = {
        "results": results,
        "requeued": sum(1 for r in results if r["requeued"]),
        "more": more,
    }
    return json_response(outcome)


async def purge(request: web.Request) -> web.Response:
    """POST /admin/v1/dlq/purge {"ids": [...]} or {"all": true}: the dead letters go (the
    jobs' records expire as any ended job's)."""
    by = require_operator(request)
    ids = params.job_ids(await json_body(request))
    purged: Purged = {"removed": await request.app[QUEUE].console.purge(ids, by)}
    return json_response(purged)
