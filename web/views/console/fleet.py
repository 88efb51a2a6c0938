"""The console's queue and fleet: the queue at a glance, intake paused and resumed, the workers and
their drain, usage per key and client (JSON or CSV), the audit stream."""

from __future__ import annotations

import csv
import datetime
import io

from aiohttp import web

from web.appkeys import COOKIE_SECRET, QUEUE, SETTINGS
from web.clients.identity import key_client, shown_client
from web.clients.operators import require_operator
from web.errors import ApiError, json_response
from web.intake.bodies import json_body
from web.replies.console import queue_view, speech_quality, workers_page
from web.schemas import admin as params
from web.schemas.console_answers import (
    AuditPage,
    Draining,
    PauseState,
    QueueView,
    Usage,
    UsageRow,
    Workers,
)


async def get_queue(request: web.Request) -> web.Response:
    require_operator(request)
    view: QueueView = await queue_view(request.app[QUEUE])
    return json_response(view)


async def pause_queue(request: web.Request) -> web.Response:
    """POST /admin/v1/queue/pause: every web process refuses new submissions (503 `paused`
    with Retry-After) from the next one on; accepted jobs go on."""
    by = require_operator(request)
    body = await json_body(request) if request.body_exists else {}  # (null: refused)
    reason, retry_after = params.pause(body)
    pause = await request.app[QUEUE].console.pause(by, reason, retry_after)
    state: PauseState = {"paused": pause.public()}
    return json_response(state)


async def resume_queue(request: web.Request) -> web.Response:
    by = require_operator(request)
    was_paused = await request.app[QUEUE].console.resume(by)
    state: PauseState = {"paused": None, "was_paused": was_paused}
    return json_response(state)


# -- workers -----------------------------------------------------------------------------------


async def list_workers(request: web.Request) -> web.Response:
    require_operator(request)
    workers = await workers_page(request.app[QUEUE])
    page: Workers = {"workers": workers, "quality": speech_quality(workers)}
    return json_response(page)


async def drain_worker(request: web.Request) -> web.Response:
    """POST /admin/v1/workers/{name}/drain: it stops taking work, finishes what it holds and
    exits 0 (it reads the request with its next heartbeat)."""
    by = require_operator(request)
    name = request.match_info["name"]
    queue = request.app[QUEUE]
    if len(name) > 200 or await queue.fleet.heartbeat(name) is None:
        raise ApiError(
            404,
            f"no live worker named {name[:200]!r}: GET /admin/v1/workers lists them",
            code="worker_not_found",
        )
    await queue.console.drain(name, by)
    period = request.app[SETTINGS].worker.heartbeat_s
    draining: Draining = {"name": name, "draining": True, "within_s": period}
    return json_response(draining, status=202)


# -- usage -------------------------------------------------------------------------------------


def client_labels(request: web.Request) -> dict[str, str]:
    """API keys' client ids -> a name an operator recognises (the key's last characters)."""
    secret = request.app[COOKIE_SECRET]
    return {
        key_client(secret, key): f"key …{key[-4:]}" for key in request.app[SETTINGS].web.api_key_set
    }


def _day(day: int) -> str:
    return (datetime.date(1970, 1, 1) + datetime.timedelta(days=day)).isoformat()


async def usage(request: web.Request) -> web.StreamResponse:
    """GET /admin/v1/usage?days=7[&format=csv]: per day and client, jobs ended, jobs succeeded,
    characters and seconds of audio."""
    require_operator(request)
    days = params.integer(request.query, "days", 7, 1, params.MAX_USAGE_DAYS)
    wanted = request.query.get("format", "json")
    if wanted not in ("json", "csv"):
        raise ApiError(400, "'format' is json or csv", code="invalid_parameter", param="format")
    tallies = await request.app[QUEUE].console.usage(days)
    labels = client_labels(request)
    rows: list[UsageRow] = [
        {
            "day": _day(day),
            "client": shown_client(client),
            "label": labels.get(
                client, "other clients" if client == "other" else "no key (a browser or script)"
            ),
            "jobs": int(measures.get("jobs", 0)),
            "succeeded": int(measures.get("ok", 0)),
            "characters": int(measures.get("chars", 0)),
            "audio_seconds": round(measures.get("audio_s", 0.0), 3),
        }
        for day, clients in sorted(tallies.items(), reverse=True)
        for client, measures in sorted(clients.items(), key=lambda kv: -kv[1].get("jobs", 0))
    ]
    if wanted == "json":
        usage: Usage = {"days": days, "usage": rows}
        return json_response(usage)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]) if rows else ["day", "client"])
    writer.writeheader()
    writer.writerows(rows)
    return web.Response(
        text=out.getvalue(),
        content_type="text/csv",
        headers={"Content-Disposition": f'attachment; filename="usage-{days}d.csv"'},
    )


async def audit(request: web.Request) -> web.Response:
    """GET /admin/v1/audit: the operators' actions, newest first."""
    require_operator(request)
    limit = params.integer(request.query, "limit", 100, 1, params.MAX_PAGE)
    before = params.entry_cursor(request.query)
    entries = await request.app[QUEUE].console.audit_log(limit, before)
    more = len(entries) == limit
    page: AuditPage = {"audit": entries, "next_cursor": entries[-1]["entry"] if more else None}
    return json_response(page)
