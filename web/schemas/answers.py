"""What the API answers in JSON, as the TypedDicts the views build their bodies as; the OpenAPI
document describes each route's answers with them (web/schemas/openapi_answers.py)."""

from __future__ import annotations

from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict

from core.queue.job import CheckCounts, JobSnapshot, JobState

# -- jobs ---------------------------------------------------------------------------------------


class JobLinks(TypedDict):
    """Where a job's snapshot, audio, events and subtitles are (paths on this server)."""

    status_url: str
    audio_url: str
    events_url: str
    subtitles_url: str


class SubmittedJob(JobLinks):
    """A job accepted (202): its snapshot and the cursor of the very event it comes from."""

    id: str
    state: JobState | Literal["expired"]  # expired: a repeated Idempotency-Key's job is gone
    events_cursor: str | None  # follow its events after this one (?last_event_id=)
    position: int | None  # jobs ahead of it; null once it left the queue
    estimated_start_s: float | None  # at the fleet's recent pace; null: not measured yet
    job: JobSnapshot | None  # null: expired
    duplicate: NotRequired[bool]  # the Idempotency-Key was seen: the first submission's job
    callback_secret: NotRequired[str]  # verifies its callbacks (with callback_url)
    client_token: NotRequired[str]  # send it as X-Client-Token to stay this client
    warnings: NotRequired[list[str]]  # what the voices will not read as written


class JobView(JobSnapshot, JobLinks):
    """A job's snapshot and links (GET /v1/tts/jobs/{id})."""

    position: NotRequired[int]  # while it is queued: jobs ahead of it
    estimated_start_s: NotRequired[float | None]


class ListedJob(JobSnapshot, JobLinks):
    """One of my jobs, with the start of its text."""

    text: str
    text_truncated: bool


class JobPage(TypedDict):
    """My jobs, newest first."""

    jobs: list[ListedJob]
    next_cursor: str | None  # the next page's `cursor`; null: no more


class Cancelling(TypedDict):
    """A cancel accepted: cancelled (it never ran) or cancelling (it stops at its next cut)."""

    id: str
    state: Literal["cancelled", "cancelling"]


# A subtitle cue: seconds in the audio, its characters [from, to) in the job's text, its segment.
Cue = TypedDict(
    "Cue",
    {
        "index": int,
        "start": float,
        "end": float,
        "text": str,
        "from": int,
        "to": int,
        "segment": int,
    },
)


class WordTime(TypedDict):
    """A word's time in the audio, in seconds (Kokoro's captioned-speech shape)."""

    word: str
    start_time: float
    end_time: float


class TimedText(TypedDict):
    """A job's subtitles as JSON (?format=json): its cues and its words' times."""

    job_id: str
    cues: list[Cue]
    words: list[WordTime]
    words_estimated: bool  # true: timed from the audio's length, not by the engine
    checks: NotRequired[CheckCounts | None]  # what the worker heard (docs/checks.md)
    segment_checks: NotRequired[list[dict[str, Any] | None]]  # each segment's verdict


class CallbackSecret(TypedDict):
    secret: str
    scheme: str


# -- voices -------------------------------------------------------------------------------------


class Voice(TypedDict):
    """A voice: built in, or registered by this client (never its data)."""

    name: str
    builtin: bool
    language: NotRequired[str | None]  # BCP 47
    gender: NotRequired[str | None]
    description: NotRequired[str | None]
    kind: NotRequired[str]  # a registered voice's: embedding or recording
    created_at: NotRequired[float]
    engines: NotRequired[list[str]]  # the live engines that speak it (in the listing)
    # What ElevenLabs' SDKs and LiveKit's plugin read: its name, premade or cloned, its labels.
    voice_id: NotRequired[str]
    category: NotRequired[Literal["premade", "cloned"]]
    labels: NotRequired[dict[str, str]]


class Engine(TypedDict):
    """An engine of the live workers."""

    name: str
    model_version: str
    sample_rate: int | None
    capabilities: dict[str, Any]
    workers: int


class VoiceList(TypedDict):
    voices: list[Voice]
    default: str  # for Mandarin text
    default_by_language: dict[str, str]
    engines: list[Engine]
    workers: int


class VoicePage(TypedDict):
    """A page of voices found, in ElevenLabs' shape (`GET /v2/voices`)."""

    voices: list[Voice]
    has_more: bool
    total_count: int
    next_page_token: str | None


class VoiceDeleted(TypedDict):
    name: str
    deleted: bool


# -- the service --------------------------------------------------------------------------------


class Health(TypedDict):
    status: Literal["ok"]


class Readiness(TypedDict):
    """Ready: Redis answers, a worker is alive, replicas in sync; the detail only to
    CHATTTS_METRICS_NETWORKS."""

    status: Literal["ready", "not_ready"]
    redis: NotRequired[bool]
    workers: NotRequired[int]  # ready ones
    workers_loading: NotRequired[int]
    events: NotRequired[bool]
    topology: NotRequired[dict[str, Any] | None]
    streams: NotRequired[dict[str, Any] | None]
    backlog: NotRequired[dict[str, Any]]
