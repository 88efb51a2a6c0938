"""The console's queue and fleet: the queue at a glance, intake paused and resumed, the workers and
their drain, usage per key and client (JSON or CSV), the audit stream."""

from __future__ import annotations

import csv
import datetime
import io
import time
from typing import Any

from aiohttp import web

from core.queue.readings import QueueReading
from core.queue.store import Queue
from web.appkeys import COOKIE_SECRET, QUEUE, SETTINGS
from web.clients.identity import key_client, shown_client
from web.clients.operators import require_operator
from web.errors import ApiError, json_response
from web.schemas import admin as params
from web.schemas.jobs import json_body

# The windows of the throughput figures, in minutes.
WINDOWS_MIN = (1, 5, 15)


def _rates(minutes: list[dict[str, float]], now: float) -> dict[str, dict[str, float]]:
    """Per second over each window, the minute under way counted for its seconds so far."""
    out = {}
    for window in WINDOWS_MIN:
        last = minutes[-window:]
        seconds = 60.0 * (len(last) - 1) + max(1.0, now - last[-1]["minute"])
        out[f"{window}m"] = {
            "jobs_per_s": round(sum(m["jobs"] for m in last) / seconds, 4),
            "audio_s_per_s": round(sum(m["audio_s"] for m in last) / seconds, 4),
        }
    return out


async def queue_view(queue: Queue) -> dict[str, Any]:
    """The queue at a glance (the console's first view, also sent live)."""
    reading: QueueReading = await queue.readings.queue(usage=False)  # (usage has its own view)
    pause = await queue.console.paused()
    now = time.time()
    minutes = await queue.console.throughput(max(WINDOWS_MIN), now)
    stats = reading.stats
    in_hand = sum(s.pending for s in reading.streams.values())
    waiting_streams = sum(s.lag for s in reading.streams.values())
    return {
        "queue": queue.keys.queue,
        "paused": pause.public() if pause else None,
        "counts": {
            "queued": sum(reading.waiting.values()) + waiting_streams,
            "running": in_hand,
            "dead_letters": reading.dead_letters,
            **{
                state: int(stats.get(state, 0))
                for state in ("succeeded", "failed", "cancelled", "dead")
            },
            "submitted": int(stats.get("submitted", 0)),
            "requeued": int(stats.get("requeued", 0)),
        },
        "lanes": {
            lane: {
                "jobs": reading.waiting.get(lane, 0),
                "clients": reading.waiting_clients.get(lane, 0),
                "oldest_age_s": round(reading.oldest_waiting_age_s.get(lane, 0.0), 3),
            }
            for lane in reading.waiting
        },
        "streams": {
            label: {
                "entries": s.length,
                "unread": s.lag,
                "in_hand": s.pending,
                "oldest_waiting_age_s": round(s.oldest_waiting_age_s, 3),
            }
            for label, s in reading.streams.items()
        },
        "throughput": _rates(minutes, now),
        "minutes": minutes,
        "workers_alive": reading.workers_alive,
        "realtime_streams": reading.streams_fleet.public(),
    }


async def get_queue(request: web.Request) -> web.Response:
    require_operator(request)
    return json_response(await queue_view(request.app[QUEUE]))


async def pause_queue(request: web.Request) -> web.Response:
    """POST /admin/v1/queue/pause: every web process refuses new submissions (503 `paused`
    with Retry-After) from the next one on; accepted jobs go on."""
    by = require_operator(request)
    body = await json_body(request) if request.body_exists else None
    reason, retry_after = params.pause(body)
    pause = await request.app[QUEUE].console.pause(by, reason, retry_after)
    return json_response({"paused": pause.public()})


async def resume_queue(request: web.Request) -> web.Response:
    by = require_operator(request)
    was_paused = await request.app[QUEUE].console.resume(by)
    return json_response({"paused": None, "was_paused": was_paused})


# -- workers -----------------------------------------------------------------------------------

# Fields of a heartbeat the console shows, as the worker wrote them (workers/stats.py).
WORKER_FIELDS = (
    "name",
    "host",
    "pid",
    "engine",
    "device",
    "model_version",
    "state",
    "in_hand",
    "holding",
    "steps_per_s",
    "started_at",
    "ready_s",
    "ts",
    "jobs_succeeded",
    "jobs_failed",
    "audio_seconds",
    "max_batch",
)


def _worker(beat: dict[str, Any]) -> dict[str, Any]:
    out = {name: beat.get(name) for name in WORKER_FIELDS}
    raw = beat.get("streams")
    streams: dict[str, Any] = raw if isinstance(raw, dict) else {}
    out["streams"] = {"capacity": streams.get("capacity"), "playing": streams.get("playing")}
    return out


async def workers_page(queue: Queue) -> list[dict[str, Any]]:
    """Every live worker (loading ones too), by name."""
    beats = await queue.fleet.heartbeats(loading=True)
    return sorted((_worker(b) for b in beats), key=lambda w: str(w["name"]))


async def list_workers(request: web.Request) -> web.Response:
    require_operator(request)
    return json_response({"workers": await workers_page(request.app[QUEUE])})


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
    period = request.app[SETTINGS].heartbeat_s
    return json_response({"name": name, "draining": True, "within_s": period}, status=202)


# -- usage -------------------------------------------------------------------------------------


def client_labels(request: web.Request) -> dict[str, str]:
    """API keys' client ids -> a name an operator recognises (the key's last characters)."""
    secret = request.app[COOKIE_SECRET]
    return {
        key_client(secret, key): f"key …{key[-4:]}" for key in request.app[SETTINGS].api_key_set
    }


def _day(day: int) -> str:
    return (datetime.date(1970, 1, 1) + datetime.timedelta(days=day)).isoformat()


async def usage(request: web.Request) -> web.StreamResponse:
    """GET /admin/v1/usage?days=7[&format=csv]: per day and client, jobs ended, jobs succeeded,
    characters and seconds of audio."""
    require_operator(request)
    days = params.integer(request, "days", 7, 1, params.MAX_USAGE_DAYS)
    wanted = request.query.get("format", "json")
    if wanted not in ("json", "csv"):
        raise ApiError(400, "'format' is json or csv", code="invalid_parameter", param="format")
    tallies = await request.app[QUEUE].console.usage(days)
    labels = client_labels(request)
    rows = [
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
        return json_response({"days": days, "usage": rows})
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
    limit = params.integer(request, "limit", 100, 1, params.MAX_PAGE)
    before = params.entry_cursor(request)
    entries = await request.app[QUEUE].console.audit_log(limit, before)
    more = len(entries) == limit
    return json_response({"audit": entries, "next_cursor": entries[-1]["entry"] if more else None})
