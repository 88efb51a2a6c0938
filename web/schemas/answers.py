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


class VoiceDeleted(TypedDict):
    name: str
    deleted: bool


# -- OpenAI and Kokoro --------------------------------------------------------------------------


class Model(TypedDict):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str


class ModelList(TypedDict):
    object: Literal["list"]
    data: list[Model]


class AudioModel(TypedDict):
    id: str


class AudioModelList(TypedDict):
    """The model names in the shape Open WebUI reads."""

    models: list[AudioModel]


class VoiceName(TypedDict):
    id: str  # what a request's `voice` may be
    name: str  # what it is, for a person


class VoiceNames(TypedDict):
    """Every name a `voice` may be, in the shape Open WebUI and Kokoro's clients read."""

    voices: list[VoiceName]


class CaptionedSpeech(TypedDict):
    """Kokoro's captioned speech: the whole audio as base64 beside its words' times."""

    audio: str  # base64
    audio_format: str
    timestamps: list[WordTime] | None  # null with return_timestamps: false
    timestamps_estimated: bool
    job_id: str


class CharacterAlignment(TypedDict):
    """ElevenLabs' alignment: each character of the text with its start and end in seconds."""

    characters: list[str]
    character_start_times_seconds: list[float]
    character_end_times_seconds: list[float]


class TimedSpeech(TypedDict):
    """ElevenLabs' speech with timestamps: audio (base64) and its characters' times; one such
    object a line when streamed."""

    audio_base64: str
    alignment: CharacterAlignment | None
    normalized_alignment: CharacterAlignment | None


# -- ChatTTS-ui's --------------------------------------------------------------------------------


class TtsFile(TypedDict):
    filename: str  # its path on the server's disk (a directory store), else its name
    url: str  # absolute
    inference_time: float
    audio_duration: float


class TtsAnswer(TypedDict):
    """ChatTTS-ui's success: its list of files, and the first one's at the top."""

    code: Literal[0]
    msg: str
    audio_files: list[TtsFile]
    filename: str
    url: str


class TtsFailure(TypedDict):
    """ChatTTS-ui's error, sent with HTTP 200: `msg` says what to fix."""

    code: Literal[1]
    msg: str


# -- the seed-era API ---------------------------------------------------------------------------


class LegacySubmitted(TypedDict):
    task_id: str
    estimate: int  # milliseconds


class LegacyStatus(TypedDict):
    """PENDING; DONE with the WAV as base64; FAILED with why."""

    status: Literal["PENDING", "DONE", "FAILED"]
    audio: NotRequired[str]
    error: NotRequired[str]


class LegacyProblem(TypedDict):
    """One validation error, as FastAPI wrote it."""

    type: str
    loc: list[str | int]
    msg: str
    input: Any
    ctx: NotRequired[dict[str, Any]]


class LegacyValidationError(TypedDict):
    """422 of `POST /tts/submit`."""

    detail: list[LegacyProblem]


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
