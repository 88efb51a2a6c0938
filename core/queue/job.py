"""The job model: states, the validated synthesis request, and the job snapshot read from Redis."""

from __future__ import annotations

import enum
import re
import secrets
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, cast

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict

AudioFormat = Literal["wav", "mp3", "opus", "ogg", "flac", "pcm", "aac"]


class JobState(enum.StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    DEAD = "dead"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_STATES


TERMINAL_STATES = frozenset(
    {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.DEAD}
)
# The same states by name, in a fixed order (metrics labels, event types, the Lua scripts).
TERMINAL_NAMES: tuple[str, ...] = tuple(s.value for s in JobState if s in TERMINAL_STATES)


# The largest seed a request may name (what torch.manual_seed takes on every platform).
MAX_SEED = 2**31 - 1


class SynthesisRequest(BaseModel):
    """What a client asks for. Stored as JSON in the job hash; the worker reads it back. Typed
    strictly: "1.5" is no speed and 0 or "yes" no boolean (docs/api.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    text: str = Field(min_length=1, description="Text to speak (cleaned of invisible characters)")
    voice: str = Field(default="zh_female", min_length=1, max_length=128)
    format: AudioFormat = "wav"
    speed: float = Field(default=1.0, ge=0.5, le=2.0)
    seed: int | None = Field(default=None, ge=0, le=MAX_SEED)
    temperature: float = Field(default=0.3, gt=0.0, le=1.0)
    top_p: float = Field(default=0.7, gt=0.0, le=1.0)
    top_k: int = Field(default=20, ge=1, le=100)
    refine: bool = False
    # ChatTTS's sentence-level prompt for its refinement pass, e.g. "[oral_2][laugh_0][break_6]"
    # (checked by the web tier against core/text/control_tokens.py; needs `refine`).
    prompt: str | None = Field(default=None, min_length=1, max_length=64)
    # False: ChatTTS gets the text without our spelling of numbers and symbols (normalize.py).
    normalize: bool = True
    cache: bool = True
    # Deliver the audio in chunks of about half a second while it is synthesized (an `audio`
    # event on the job's event stream per chunk; see core/queue/lua/chunk.lua).
    stream: bool = False
    # When a stream's first audio goes out: "gapless", once the rest can follow without a gap at
    # the worker's measured speed (at once on a device fast enough); "now", at its first chunk,
    # gaps or not (a client that buffers, or reads as fast as it can).
    stream_start: Literal["gapless", "now"] = "gapless"
    # A stream's segments and their checks (workers/checks/): "send" at once and tell each
    # verdict after (a segment made again is in the job's file, not its stream), "hold" each
    # until it is checked; None: the worker's CHATTTS_CHECK_STREAMS.
    stream_check: Literal["send", "hold"] | None = None
    # "bulk": the job waits in the bulk lane, behind interactive work (core/queue/lanes.py);
    # "high" (API keys): interactive, and under CHATTTS_SCHEDULER=fifo read from its own stream
    # before the others (the OpenAI-compatible endpoint's jobs are "high").
    priority: Literal["normal", "high", "bulk"] = "normal"


def queue_position(seq: int, started_seq: int) -> int:
    """Jobs ahead of a queued job (0 = next): its enqueue number past the last one started."""
    return max(0, seq - started_seq - 1)


# Job ids are uuid4 hex: anything else names no job (and must reach no Redis key or log line).
_JOB_ID = re.compile(r"[0-9a-f]{32}")


def new_job_id() -> str:
    """128 random bits in hex (a third of uuid4()'s cost on the submit path, the same shape)."""
    return secrets.token_hex(16)


def is_job_id(text: str) -> bool:
    return _JOB_ID.fullmatch(text) is not None


def legacy_job_id(task_id: str) -> str:
    """The legacy API's task id as a job id: it also accepted them dashed or in capitals."""
    return task_id.replace("-", "").lower()


def _num(value: str | None) -> float | None:
    return float(value) if value not in (None, "") else None


class CheckCounts(TypedDict):
    """Segments the worker heard (workers/checks/): by verdict, and those made again."""

    passed: int
    failed: int
    unheard: int
    remade: int


class JobSnapshot(TypedDict):
    """A job as clients see it: `Job.public()` and the `job` of every event (lua/_prelude.lua's
    `snapshot`, which adds `starts`). Fields without a value are left out."""

    id: str
    state: JobState
    voice: str
    format: AudioFormat
    attempts: int
    created_at: float  # Unix seconds, as every *_at
    started_at: NotRequired[float]
    finished_at: NotRequired[float]
    error: NotRequired[str]
    segments_done: NotRequired[int]
    segments_total: NotRequired[int]
    duration_s: NotRequired[float]
    audio_size: NotRequired[int]  # bytes of its file
    sample_rate: NotRequired[int]
    cancel_requested: bool
    cached: bool  # its audio came from the result cache
    chunks_done: NotRequired[int]  # a streaming job's chunks out so far
    callback: NotRequired[Literal["pending", "delivered", "failed"]]
    callback_attempts: NotRequired[int]
    callback_error: NotRequired[str]
    document: bool  # its audio is kept in parts
    checks: NotRequired[CheckCounts]
    starts: NotRequired[int]  # times a worker started it (events' snapshots only)


@dataclass(frozen=True)
class Job:
    """A snapshot of one job hash."""

    id: str
    client: str
    state: JobState
    request: SynthesisRequest
    created_at: float
    started_at: float | None
    finished_at: float | None
    attempts: int
    error: str | None
    seq: int
    segments_done: int
    segments_total: int
    duration_s: float | None
    audio_size: int | None
    sample_rate: int | None
    cancel_requested: bool
    cached: bool
    chunks_done: int = 0  # a streaming job's chunks out so far (see lua/chunk.lua)
    # Its callback: pending | delivered | failed, the attempts so far, the last failure.
    callback: str | None = None
    callback_attempts: int = 0
    callback_error: str | None = None
    document: bool = False  # its audio is kept in parts (core/audio/documents.py)
    samples_done: int = 0  # samples of its audio stored so far, pauses included
    # What the worker heard in its segments (workers/checks/): passed, failed, unheard, remade.
    checks: CheckCounts | None = None

    @classmethod
    def from_hash(cls, fields: dict[bytes, bytes]) -> Job:
        h = {k.decode(): v.decode() for k, v in fields.items()}
        audio_size = _num(h.get("audio_size"))
        sample_rate = _num(h.get("sample_rate"))
        return cls(
            id=h["id"],
            client=h.get("client", ""),
            state=JobState(h["state"]),
            request=SynthesisRequest.model_validate_json(h["request"]),
            created_at=float(h["created_at"]),
            started_at=_num(h.get("started_at")),
            finished_at=_num(h.get("finished_at")),
            attempts=int(h.get("attempts") or 0),
            error=h.get("error") or None,
            seq=int(h.get("seq") or 0),
            segments_done=int(h.get("segments_done") or 0),
            segments_total=int(h.get("segments_total") or 0),
            duration_s=_num(h.get("duration_s")),
            audio_size=int(audio_size) if audio_size is not None else None,
            sample_rate=int(sample_rate) if sample_rate is not None else None,
            cancel_requested=h.get("cancel_requested") == "1",
            cached=h.get("cached") == "1",
            chunks_done=int(h.get("chunks_done") or 0),
            callback=h.get("callback") or None,
            callback_attempts=int(h.get("callback_attempts") or 0),
            callback_error=h.get("callback_error") or None,
            document=h.get("document") == "1",
            samples_done=int(h.get("samples_done") or 0),
            checks=_checks(h),
        )

    def public(self) -> JobSnapshot:
        """The snapshot clients see (same fields as the snapshot inside events)."""
        out: dict[str, Any] = {
            "id": self.id,
            "state": self.state.value,
            "voice": self.request.voice,
            "format": self.request.format,
            "attempts": self.attempts,
            "created_at": self.created_at,
            "cancel_requested": self.cancel_requested,
            "cached": self.cached,
            "document": self.document,
        }
        optional = {
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "error": self.error,
            "segments_done": self.segments_done or None,
            "segments_total": self.segments_total or None,
            "duration_s": self.duration_s,
            "audio_size": self.audio_size,
            "sample_rate": self.sample_rate,
            "chunks_done": self.chunks_done or None,
            "callback": self.callback,
            "callback_attempts": self.callback_attempts if self.callback else None,
            "callback_error": self.callback_error,
            "checks": self.checks,
        }
        out.update({k: v for k, v in optional.items() if v is not None})
        # Built field by field: the API document's tests check real snapshots against the type.
        return cast(JobSnapshot, out)


CHECK_COUNTS = ("passed", "failed", "unheard", "remade")


def _checks(h: dict[str, str]) -> CheckCounts | None:
    """The job's counts of heard segments (lua/_prelude.lua: count_check), if any was heard."""
    if not any(h.get(f"checks_{name}") for name in CHECK_COUNTS[:3]):
        return None
    return cast(CheckCounts, {name: int(h.get(f"checks_{name}") or 0) for name in CHECK_COUNTS})
