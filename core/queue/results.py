"""What the queue's calls answer: the refusals of a submission, and the records of a job's
submission, start and finished segments."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.queue.durable import NotReplicated
from core.queue.job import SynthesisRequest
from core.queue.keys import CHUNKS_LINGER_S


class QueueError(Exception):
    """A submission the queue refused; `status` and `code` are the HTTP answer that says so."""

    status = 400
    code = "queue_refused"


class IdempotencyKeyReused(QueueError):
    """An Idempotency-Key sent again with another request (the IETF draft's 422)."""

    status = 422
    code = "idempotency_key_reused"

    def __init__(self, job_id: str) -> None:
        super().__init__(
            f"this Idempotency-Key was first sent with another request (job {job_id}); a retry "
            "sends the same body, and a new request a new key"
        )
        self.job_id = job_id


class BacklogFull(QueueError):
    status = 429
    code = "backlog_full"

    def __init__(self, depth: int) -> None:
        super().__init__(f"the queue holds {depth} jobs, its limit; retry later")
        self.depth = depth


class BacklogShareFull(QueueError):
    """One API key or one source address holds its share of the backlog already."""

    status = 429
    code = "backlog_share"

    def __init__(self, held: int, share: int, keyed: bool, owners: int = 1) -> None:
        whose = "your API key has" if keyed else "clients at your address have"
        super().__init__(
            f"{whose} {held} jobs waiting or running, the most one may hold of the queue "
            f"while {owners} keys or addresses have jobs in it ({share}; at most "
            "CHATTTS_MAX_BACKLOG_PER_OWNER): retry as they finish (Retry-After)"
        )
        self.held = held


class ClientCapReached(QueueError):
    status = 429
    code = "too_many_active_jobs"

    def __init__(self, active: int) -> None:
        super().__init__(
            f"you already have {active} unfinished jobs, the limit per client; "
            "wait for some to finish"
        )
        self.active = active


class StorageQuotaReached(QueueError):
    status = 429
    code = "storage_quota"

    def __init__(
        self, used: int, needed: int, quota: int, wait_s: int, per: str = "client"
    ) -> None:
        whose = "your stored audio" if per == "client" else "the audio stored from your address"
        super().__init__(
            f"this job's audio (about {_mb(needed)}) would take {whose} past {_mb(quota)}, the "
            f"limit per {per} ({_mb(used)} in use, kept until the jobs expire): retry when "
            "older ones have expired (Retry-After), or send shorter jobs"
        )
        self.wait_s = wait_s  # until its oldest charge lapses


class StoreFull(QueueError):
    """The store's room, less what accepted jobs will still write, cannot take this job."""

    status = 503
    code = "store_full"

    def __init__(self, room: int, reserved: int, needed: int, where: str) -> None:
        super().__init__(
            f"{where} has about {_mb(max(0, room - reserved))} free once the jobs accepted "
            f"before are written, and this job needs about {_mb(needed)}: retry later "
            "(Retry-After) or send a shorter job"
        )


class StreamsFull(QueueError):
    """Streamed jobs' chunks would pass their budget in Redis (CHATTTS_STREAM_CHUNK_BYTES): 503
    for the queue's, 429 for the half a client or an address may take."""

    status = 503
    code = "streams_full"

    def __init__(self, used: int, needed: int, budget: int, wait_s: int, per: str) -> None:
        whose = {"client": "your streams", "address": "the streams of your address"}
        super().__init__(
            f"this stream's audio (about {_mb(needed)}) would take {whose.get(per, 'streams')} "
            f"past {_mb(budget)} kept in Redis ({_mb(used)} in use, kept until about "
            f"{CHUNKS_LINGER_S // 60} minutes after each stream ends): retry after Retry-After, or "
            "leave 'stream' out and download the file when it is ready"
        )
        self.wait_s = wait_s  # until the oldest stream's chunks lapse
        if per != "queue":  # the client's (or its address's) own share: a 429, as a quota
            self.status = 429


class QueuePaused(QueueError):
    """An operator paused the queue's intake (core/queue/console.py)."""

    status = 503
    code = "paused"

    def __init__(self, retry_after_s: int, reason: str) -> None:
        why = f": {reason}" if reason else ""
        super().__init__(
            f"the service is not accepting new jobs for now (paused by its operators{why}); "
            "retry after the Retry-After seconds. Jobs accepted before go on"
        )
        self.retry_after_s = retry_after_s


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


class Unreplicated(QueueError):
    """The primary holds the change but too few replicas acknowledged it (durable.py)."""

    status = 503
    code = "not_replicated"

    def __init__(self, cause: NotReplicated, job_id: str | None = None) -> None:
        what = f"job {job_id}" if job_id else "change"
        super().__init__(
            f"the {what} reached Redis's primary, but {cause}, so it is not confirmed. Retry "
            "(with the same Idempotency-Key for a submission: the retry finds this job instead "
            "of adding another)"
        )
        self.job_id = job_id


@dataclass(frozen=True)
class Room:
    """What a submission may take, as the web tier last sampled it: `store`, the bytes free
    where audio is kept (None: unknown or unbounded; `where` names it), and `chunk_budget`,
    the bytes streams may keep in Redis (0: no limit)."""

    store: int | None = None
    chunk_budget: int = 0
    where: str = "the audio store"


@dataclass(frozen=True)
class Submitted:
    job_id: str
    event_id: str | None
    duplicate: bool
    event: dict[str, Any] | None = None  # the queued event (new jobs only)
    started_seq: int = 0  # the queue's started watermark at submit (for the position)
    depth: int = 0  # jobs in the queue (both streams) right after this one joined (new jobs only)
    seq: int = 0  # its place in the queue-wide count of submissions (for the position)
    position: int | None = None  # jobs ahead of it in the fair waiting room (None: FIFO)


@dataclass(frozen=True)
class SegmentDone:
    """A finished segment, as `Queue.progress` stores it."""

    index: int  # 1-based
    total: int
    audio: bytes  # encoded in the job's format; a document's: 16-bit PCM after its pause
    duration_s: float
    samples: int  # its samples in the job's audio, the pause before it included
    sample_rate: int
    cue: dict[str, int]  # its subtitle cue (workers/jobs.py builds it)
    eta: float | None = None  # when the job should end (unix time), from its pace so far
    document: bool = False


@dataclass(frozen=True)
class Started:
    token: str
    request: SynthesisRequest
    client: str
    stream: str  # the job stream its entry lives in
    document: bool = False  # kept in parts; resumes after its last stored segment
    segments_done: int = 0  # stored by earlier attempts (a document's), to skip
    samples_done: int = 0  # their samples, pauses included
    attempt: int = 1  # deliveries counted so far, this one included (the token is the start's)
    queued_at: float = 0.0  # when it last joined the queue (submitted, or given back)
    bulk: bool = False  # it waited in the fair scheduler's bulk lane
    suspect: bool = False  # its last run never ended cleanly (reclaimed, or an engine error)
