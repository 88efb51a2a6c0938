"""The operators' console's readings, shaped as its views and its live page show them: the
queue at a glance, the live workers, the newest dead letters."""

from __future__ import annotations

import time
from typing import Any

from core.queue.console import DeadLetter
from core.queue.readings import QueueReading
from core.queue.store import Queue
from web.clients.identity import shown_client
from web.schemas.console_answers import DeadLetter as DeadLetterView
from web.schemas.console_answers import QueueView

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


async def queue_view(queue: Queue) -> QueueView:
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
    checks = beat.get("checks")
    out["checks"] = checks if isinstance(checks, dict) else {}
    return out


def speech_quality(workers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the live workers heard in the segments they made (docs/checks.md), by engine and
    voice, since each started: so that a voice or a model that degrades is seen."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for worker in workers:
        for voice, counts in worker["checks"].items():
            key = (str(worker.get("engine")), str(voice))
            row = rows.setdefault(
                key,
                {"engine": key[0], "voice": key[1], "passed": 0, "failed": 0, "unheard": 0,
                 "remade": 0, "reasons": {}},
            )  # fmt: skip
            for name in ("passed", "failed", "unheard", "remade"):
                row[name] += int(counts.get(name) or 0)
            for reason, n in (counts.get("reasons") or {}).items():
                row["reasons"][reason] = row["reasons"].get(reason, 0) + int(n)
    for row in rows.values():
        row["heard"] = row["passed"] + row["failed"] + row["unheard"]
    return sorted(
        rows.values(), key=lambda r: (-r["failed"] - r["remade"], r["engine"], r["voice"])
    )


async def workers_page(queue: Queue) -> list[dict[str, Any]]:
    """Every live worker (loading ones too), by name."""
    beats = await queue.fleet.heartbeats(loading=True)
    return sorted((_worker(b) for b in beats), key=lambda w: str(w["name"]))


# A listed job's text: its start, as a client's own list shows it.
LISTED_TEXT_CHARS = 200


def listed_job(record: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = dict(record)
    out["text"] = out.pop("head", "")[:LISTED_TEXT_CHARS]
    if "client" in out:
        out["client"] = shown_client(out["client"])
    for name in ("created_at", "finished_at", "duration_s"):
        if out.get(name):
            out[name] = float(out[name])
    for name in ("attempts", "starts", "chars", "requeues"):
        if out.get(name):
            out[name] = int(out[name])
    out["document"] = out.get("document") == "1"
    return out


def dead_letter_view(letter: DeadLetter) -> DeadLetterView:
    return {
        "entry": letter.entry,
        "id": letter.job_id,
        "reason": letter.reason,
        "dead_at": letter.at,
        "last_worker": letter.worker or None,
        "job": listed_job(letter.job) if letter.job else None,
        "requeueable": bool(letter.job and letter.job.get("state") == "dead"),
    }


async def dead_letter_page(queue: Queue, limit: int) -> list[DeadLetterView]:
    """The newest `limit` dead letters (the live view's)."""
    letters, _ = await queue.console.dead_letters(limit)
    return [dead_letter_view(letter) for letter in letters]
