"""What the operators' console answers in JSON, as the TypedDicts its views build (nested
readings are free-form objects); the OpenAPI document reads them too."""

from __future__ import annotations

from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict

from web.schemas.answers import JobLinks

# -- the operators' console (nested readings are free-form objects) -----------------------------


class SignedIn(TypedDict):
    signed_in: bool


class QueueView(TypedDict):
    """The queue at a glance."""

    queue: str
    paused: dict[str, Any] | None  # by, at, reason, retry_after_s
    counts: dict[str, int]
    lanes: dict[str, dict[str, Any]]
    streams: dict[str, dict[str, Any]]
    throughput: dict[str, dict[str, float]]  # per window: jobs_per_s, audio_s_per_s
    minutes: list[dict[str, float]]
    workers_alive: int
    realtime_streams: dict[str, Any]


class PauseState(TypedDict):
    paused: dict[str, Any] | None  # by, at, reason, retry_after_s; null: taking jobs
    was_paused: NotRequired[bool]


class Workers(TypedDict):
    workers: list[dict[str, Any]]  # each live worker's heartbeat, as the console shows it
    quality: list[dict[str, Any]]  # what they heard, by engine and voice


class Draining(TypedDict):
    name: str
    draining: bool
    within_s: float  # it reads the request with its next heartbeat


class UsageRow(TypedDict):
    day: str  # ISO date
    client: str
    label: str
    jobs: int
    succeeded: int
    characters: int
    audio_seconds: float


class Usage(TypedDict):
    days: int
    usage: list[UsageRow]


class AuditPage(TypedDict):
    audit: list[dict[str, Any]]
    next_cursor: str | None


class ConsoleJobPage(TypedDict):
    jobs: list[dict[str, Any]]  # each job's fields as kept, its text's start
    next_cursor: float | None  # Unix seconds


class JobRecord(TypedDict):
    """A job's whole record."""

    job: dict[str, Any]  # every field, its request parsed
    runs: list[dict[str, Any]]  # each start and its worker
    events: list[dict[str, Any]]
    callback: dict[str, Any] | None
    dead_letter: dict[str, Any] | None
    links: JobLinks


class DeadLetter(TypedDict):
    entry: str
    id: str
    reason: str
    dead_at: float
    last_worker: str | None
    job: dict[str, Any] | None
    requeueable: bool


class DeadLetterPage(TypedDict):
    dead_letters: list[DeadLetter]
    next_cursor: str | None


class Requeue(TypedDict):
    """One requeue's outcome."""

    id: str
    requeued: bool
    state: NotRequired[str]
    events_cursor: NotRequired[str]
    error: NotRequired[Literal["job_not_found", "job_not_dead"]]


class Requeued(Requeue, JobLinks):
    """A dead job queued again."""


class RequeueResults(TypedDict):
    results: list[Requeue]
    requeued: int
    more: bool  # true: more dead letters than one request takes; ask again


class Purged(TypedDict):
    removed: int
