"""The web tier's jobs, one way for every API (jobs, OpenAI, legacy, WebSocket): submit, cancel,
look up, list (following one: web/following.py)."""

from __future__ import annotations

from typing import Any, Literal

from aiohttp import web

from core.queue.job import Job, JobSnapshot, is_job_id
from core.queue.results import Submitted
from core.text.languages import notice
from web.appkeys import CALLBACK_SECRET, QUEUE, SETTINGS, THROUGHPUT
from web.callbacks.signing import client_secret
from web.errors import ApiError, job_not_found
from web.intake.door import Policy, Who, admit
from web.schemas.answers import JobLinks, ListedJob, SubmittedJob
from web.schemas.jobs import position, valid_job_id


def job_urls(app: web.Application, job_id: str) -> JobLinks:
    """A job's URLs, as every answer that names a job gives them."""
    router, plain = app.router, is_job_id(job_id)

    def url(name: str) -> str:
        # What url_for builds, at a fraction of its cost (it runs on every submit): a job id is
        # hex, nothing in it to quote.
        if plain:
            return router[name].canonical.format(job_id=job_id)
        return str(router[name].url_for(job_id=job_id))

    return {
        "status_url": url("job"),
        "audio_url": url("job_audio"),
        "events_url": url("job_events"),
        "subtitles_url": url("job_subtitles"),
    }


# -- submit, cancel, look up --------------------------------------------------------------------

# The job API's door (POST /v1/tts/jobs and the jobs socket): a long text may be a document.
JOBS = Policy(documents=True, callbacks=True)


async def submit(
    app: web.Application, by: Who, payload: Any, idem: str | None = None
) -> SubmittedJob:
    """Admit a job request body (web/intake/door.py); the body of the 202 (with
    `"duplicate": true` for a repeat)."""
    async with admit(app, by, payload, JOBS, idem) as admitted:
        body = await submitted_body(app, admitted.submitted)
    said = notice(admitted.request.text)
    if said is not None:  # taken, and told: the voices read Mandarin and English
        body["warnings"] = [said]
    if admitted.callback is not None:  # what verifies it, for a script that keeps nothing else
        body["callback_secret"] = client_secret(app[CALLBACK_SECRET], by.client)
    return body


async def submitted_body(app: web.Application, submitted: Submitted) -> SubmittedJob:
    """The job's snapshot with the cursor of the very event it comes from (consistent pair)."""
    job_id = submitted.job_id
    snapshot: JobSnapshot | None
    if submitted.event is not None:  # a new job: the enqueue script returned all we need
        snapshot = submitted.event["job"]
        cursor, seq, started = submitted.event_id, submitted.seq, submitted.started_seq
    else:
        # A duplicate has no event of its own: the latest event says where the job stands.
        queue = app[QUEUE]
        event, seq, started = await queue.where(job_id, submitted.event_id)
        cursor = event[0] if event is not None else None
        if event is not None:
            snapshot = event[1]["job"]
        else:  # events trimmed or expired: the hash alone, if it is still there
            job = await queue.get(job_id)
            snapshot = job.public() if job else None
    ahead = submitted.position
    if ahead is None:
        ahead = position(snapshot, seq, started) if snapshot is not None else None
    links = job_urls(app, job_id)
    body: SubmittedJob = {
        "id": job_id,
        "state": snapshot["state"] if snapshot is not None else "expired",
        "status_url": links["status_url"],
        "audio_url": links["audio_url"],
        "events_url": links["events_url"],
        "subtitles_url": links["subtitles_url"],
        "events_cursor": cursor,
        "position": ahead,
        "estimated_start_s": estimated_start(app, ahead),
        "job": snapshot,
    }
    if submitted.duplicate:
        body["duplicate"] = True
    return body


def estimated_start(app: web.Application, ahead: int | None) -> float | None:
    """Seconds until a job with `ahead` jobs before it starts, at the fleet's completion rate
    of the last seconds (None: no rate measured yet, or nothing to wait for)."""
    meter = app.get(THROUGHPUT)
    rate = meter.rate() if meter is not None else None
    if ahead is None or not rate or rate <= 0:
        return None
    return round(ahead / rate, 1)


# Events read per look at a client's event stream while listing its jobs.
LIST_SCAN_EVENTS = 200
# A listed job carries its text's start (a page of documents stays small): a list to pick from.
LIST_TEXT_CHARS = 500


async def my_jobs(
    app: web.Application, client: str, states: frozenset[str], limit: int, cursor: str | None
) -> tuple[list[ListedJob], str | None]:
    """The client's jobs, newest first, as its event stream remembers them (each job's
    submission, CHATTTS_CLIENT_EVENTS_MAXLEN events back at most: bounded work per request),
    those in `states` only (empty: all); and the cursor of the next page (None: no more)."""
    queue = app[QUEUE]
    stream, seen = queue.keys.client_events(client), set()
    found: list[ListedJob] = []
    at, scanned = cursor, 0
    while len(found) < limit and scanned < app[SETTINGS].redis.client_events_maxlen:
        events = await queue.events.before(stream, at, LIST_SCAN_EVENTS)
        if not events:
            return found, None
        submissions: list[tuple[str, str]] = []  # (event id, job id), newest first
        for event_id, event in events:
            scanned += 1
            job = event.get("job") or {}
            # A job's first `queued` (a retry or a requeue queues it again).
            submitted = event.get("type") == "queued" and not job.get("attempts")
            job_id = job.get("id")
            requeued = bool(event.get("requeued"))
            if not submitted or requeued or not isinstance(job_id, str) or job_id in seen:
                continue
            seen.add(job_id)
            submissions.append((event_id, job_id))
        while submissions:  # the records, what the page still lacks at a time, a read each
            lacking = limit - len(found)
            batch, submissions = submissions[:lacking], submissions[lacking:]
            records = await queue.get_many([job_id for _, job_id in batch])
            for (event_id, job_id), record in zip(batch, records, strict=True):
                if record is None or (states and record.state.value not in states):
                    continue  # expired, or not asked for
                text = record.request.text
                listed: ListedJob = {
                    **record.public(),
                    **job_urls(app, job_id),
                    "text": text[:LIST_TEXT_CHARS],
                    "text_truncated": len(text) > LIST_TEXT_CHARS,
                }
                found.append(listed)
                if len(found) == limit:
                    return found, event_id
        at = events[-1][0]
    return found, at if len(found) == limit else None


async def get(app: web.Application, job_id: str) -> Job:
    """The job, or the one 404 (a malformed id reaches no Redis key)."""
    job = await app[QUEUE].get(valid_job_id(job_id))
    if job is None:
        raise job_not_found(job_id)
    return job


async def cancel(
    app: web.Application, job_id: str, client: str
) -> Literal["cancelled", "cancelling"]:
    """Cancel `client`'s job ("": an admin's, any job): 'cancelled' (it never ran) or
    'cancelling' (it stops at its next boundary). Reading a job by id is open (ids are
    capability URLs); ending it is its owner's."""
    verdict, state = await app[QUEUE].cancel(valid_job_id(job_id), client)
    if verdict == "missing":
        raise job_not_found(job_id)
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
            state=state,
        )
    return "cancelled" if verdict == "cancelled" else "cancelling"
