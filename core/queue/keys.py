"""Every Redis key and channel name of one queue, in one place: Python reads them here, and the
Lua scripts call the same definitions, written into their generated header (scripts.py).

All names share the hash tag `{queue}` so that multi-key Lua scripts stay in one Redis Cluster slot.
"""

from __future__ import annotations

from dataclasses import dataclass

CONSUMER_GROUP = "workers"

# How long the console's tallies live (their keys expire; the scripts read these, scripts.py):
# a month of daily usage, with a day more so that the oldest day is whole; an hour of minutes.
USAGE_DAYS_KEPT = 32
THROUGHPUT_MINUTES_KEPT = 60
# Clients tallied apart per day; the rest share `other`: fresh cookies cannot grow Redis
# without bound (API keys are few, and an operator's; cookie clients are anyone's).
USAGE_CLIENTS_PER_DAY = 2_000
# How long a streamed job's chunks stay in Redis after its last one: a listener that dropped
# may resume; their charge on the chunk budget lapses then (lua/_prelude.lua: retire).
CHUNKS_LINGER_S = 600
# How long a document's parts stay once its file is encoded from them (any format but wav and
# pcm, whose file is its parts): a player following them as they were made finishes.
PARTS_LINGER_S = 600
# Operators' actions the audit stream keeps (about the newest; trimmed approximately).
AUDIT_MAXLEN = 10_000


@dataclass(frozen=True)
class Keys:
    prefix: str = "tts"
    queue: str = "main"

    @property
    def base(self) -> str:
        return f"{self.prefix}:{{{self.queue}}}"

    @property
    def jobs(self) -> str:
        """Stream of runnable jobs, read by the consumer group."""
        return f"{self.base}:jobs"

    @property
    def jobs_high(self) -> str:
        """Stream of high-priority jobs, read before `jobs` (interactive requests)."""
        return f"{self.base}:jobs:high"

    @property
    def streams(self) -> tuple[str, str]:
        """Both job streams, the one read first first."""
        return (self.jobs_high, self.jobs)

    def stream(self, priority: str) -> str:
        return self.jobs_high if priority == "high" else self.jobs

    # The fair scheduler's waiting room (lua/take.lua). Lane "i" is interactive work, "b" bulk,
    # "s" streams.

    def lane(self, lane: str) -> str:
        """Sorted set of the clients with jobs waiting in a lane, scored by their pass (the
        virtual time at which they are served next)."""
        return f"{self.base}:lane:{lane}"

    def waiting(self, lane: str, who: str) -> str:
        """List of one client's job ids waiting in a lane, oldest first."""
        return f"{self.base}:wait:{lane}:{who}"

    def since(self, lane: str) -> str:
        """Sorted set of a lane's waiting job ids by when they joined (the oldest's age)."""
        return f"{self.base}:since:{lane}"

    @property
    def fair(self) -> str:
        """Hash of the scheduler's clocks (each lane's pass and virtual time), `queued` (jobs
        waiting) and `n:<lane>` (per lane)."""
        return f"{self.base}:fair"

    def gone(self, lane: str) -> str:
        """Sorted set of the clients whose list in a lane ran dry, by the pass they had: one
        that comes back resumes from it (coming and going gains nothing)."""
        return f"{self.base}:gone:{lane}"

    @property
    def wake(self) -> str:
        """List an idle worker blocks on (BLPOP): pushed when work arrives."""
        return f"{self.base}:wake"

    @property
    def dlq(self) -> str:
        """Stream of jobs that exhausted their deliveries."""
        return f"{self.base}:dlq"

    # The operator's console (core/queue/console.py).

    @property
    def paused(self) -> str:
        """Hash naming who paused the queue's intake, when and why; absent: open (enqueue.lua)."""
        return f"{self.base}:paused"

    @property
    def audit(self) -> str:
        """Stream of the operators' actions: who, what, when."""
        return f"{self.base}:audit"

    @property
    def index(self) -> str:
        """Sorted set of every job kept, by when it was submitted (the console's search)."""
        return f"{self.base}:index"

    def runs(self, job_id: str) -> str:
        """List of a job's starts (JSON: start, attempt, worker, when), oldest first."""
        return f"{self.base}:runs:{job_id}"

    def tally(self, day: int) -> str:
        """Hash of one day's usage (days since the epoch, UTC): `<client>|<measure>` -> count."""
        return f"{self.base}:tally:{day}"

    def minute(self, minute: int) -> str:
        """Hash of the jobs that ended in one minute (minutes since the epoch) and their audio."""
        return f"{self.base}:minute:{minute}"

    def drain(self, worker: str) -> str:
        """Present while an operator asks worker `worker` to drain (finish and exit)."""
        return f"{self.base}:drain:{worker}"

    @property
    def stats(self) -> str:
        """Hash of counters (completed, failed, fenced, ...) shared by all workers."""
        return f"{self.base}:stats"

    @property
    def workers(self) -> str:
        """Sorted set of worker names scored by their last heartbeat (for listing)."""
        return f"{self.base}:workers"

    @property
    def voices(self) -> str:
        """Hash of registered voices: name -> JSON."""
        return f"{self.base}:voices"

    def job(self, job_id: str) -> str:
        return f"{self.base}:job:{job_id}"

    def audio(self, job_id: str) -> str:
        return f"{self.base}:audio:{job_id}"

    def segments(self, job_id: str) -> str:
        """List of encoded audio segments, filled while a job streams."""
        return f"{self.base}:seg:{job_id}"

    def chunks(self, job_id: str) -> str:
        """List of 16-bit PCM chunks of a streaming job, in order (see lua/chunk.lua)."""
        return f"{self.base}:chunk:{job_id}"

    def parts(self, job_id: str) -> str:
        """List of a document job's finished segments as 16-bit PCM, each after its pause: its
        audio, joined when served (no single value grows with the document)."""
        return f"{self.base}:parts:{job_id}"

    def pieces(self, job_id: str) -> str:
        """List of a finished document's encoded file (mp3, opus...) in pieces of equal size
        (core/audio/documents.py), encoded from its parts when it ended."""
        return f"{self.base}:pieces:{job_id}"

    def pieces_draft(self, job_id: str, token: str) -> str:
        """The same, written by the attempt holding `token`: its completion (fenced) makes it
        the job's; a stale attempt's expires unused."""
        return f"{self.base}:pieces:{job_id}:{token}"

    def cues(self, job_id: str) -> str:
        """List of a job's subtitle cues, one JSON per finished segment (see lua/progress.lua)."""
        return f"{self.base}:cues:{job_id}"

    def cache(self, digest: str) -> str:
        """Hash of a cached result (audio, duration_s, sample_rate) by request digest."""
        return f"{self.base}:cache:{digest}"

    def idem(self, client: str, key: str) -> str:
        return f"{self.base}:idem:{client}:{key}"

    def usage(self, client: str) -> str:
        """Hash of a client's storage charges: job id -> expected bytes, and `total`."""
        return f"{self.base}:usage:{client}"

    def usage_expiry(self, client: str) -> str:
        """Sorted set of the same job ids, by when their charge lapses (the job's expiry)."""
        return f"{self.base}:usage_exp:{client}"

    @property
    def pending(self) -> str:
        """The bytes accepted jobs will still write (their charges, each job's in its record's
        `reserved` until it ends): the store's sampled room, less these, is what a new job may
        take (lua/enqueue.lua)."""
        return f"{self.base}:pending"

    @property
    def chunk_usage(self) -> str:
        """Hash of the chunk bytes streams keep in Redis: job id -> bytes, and `total` (the
        queue's chunk budget, enqueue.lua)."""
        return f"{self.base}:chunks"

    @property
    def chunk_usage_expiry(self) -> str:
        """Sorted set of the same job ids, by when each charge lapses (CHUNKS_LINGER_S after its
        job ended)."""
        return f"{self.base}:chunks_exp"

    def owner_chunk_usage(self, owner: str) -> str:
        """The same account for one client or source address (half the budget each)."""
        return f"{self.base}:chunks:{owner}"

    def owner_chunk_usage_expiry(self, owner: str) -> str:
        return f"{self.base}:chunks_exp:{owner}"

    @property
    def backlog(self) -> str:
        """Hash of each backlog owner's (an API key's, or a source address's) jobs waiting or
        running: its share of the backlog (enqueue.lua)."""
        return f"{self.base}:backlog"

    def active(self, client: str) -> str:
        """Set of a client's unfinished job ids (the per-client cap)."""
        return f"{self.base}:active:{client}"

    def rate(self, scope: str, who: str) -> str:
        """A rate limit's bucket (web/clients/limits.py): one timestamp."""
        return f"{self.base}:rate:{scope}:{who}"

    def revoked_session(self, signature: str) -> str:
        """A console session signed out before it lapsed (its signature), until it would lapse."""
        return f"{self.base}:revoked:{signature}"

    @property
    def connection_counts(self) -> str:
        """Hash of the web processes' open connections by source (`process|source` -> count),
        those with many only (connection_census.lua)."""
        return f"{self.base}:conns_by_source"

    @property
    def connection_reports_due(self) -> str:
        """Sorted set of connection_counts' fields by the time each report lapses."""
        return f"{self.base}:conns_by_source_due"

    def leases(self, kind: str, who: str) -> str:
        """Live connections of a client or an address: a sorted set of expiring leases."""
        return f"{self.base}:conns:{kind}:{who}"

    @property
    def voice_data(self) -> str:
        """Hash of registered voices' data (name -> embedding or recording), apart from their
        metadata in `voices`: listing voices reads no voice data."""
        return f"{self.base}:voices:data"

    def owned_voices(self, owner: str) -> str:
        """Names and sizes of the voices one client registered (quota accounting)."""
        return f"{self.base}:voices:owner:{owner}"

    @property
    def callbacks_due(self) -> str:
        """Sorted set of callbacks to deliver: job id scored by when (ms) it is due or, while a
        sender holds it, by when its claim lapses (see callbacks.py)."""
        return f"{self.base}:callbacks"

    @property
    def callbacks(self) -> str:
        """Hash of pending callbacks: job id -> JSON (target, client, attempts, the job)."""
        return f"{self.base}:callbacks:data"

    def worker(self, name: str) -> str:
        return f"{self.base}:worker:{name}"

    def job_events(self, job_id: str) -> str:
        return f"{self.base}:ev:job:{job_id}"

    def client_events(self, client: str) -> str:
        return f"{self.base}:ev:client:{client}"

    @property
    def doorbell(self) -> str:
        """The queue's one doorbell channel: each message names the event streams that grew.

        One channel in the queue's slot, not one per stream: in a cluster it is a sharded
        channel (SPUBLISH), carried by the queue's shard alone; every web process subscribes
        to it once. The Lua scripts derive it from a stream's name (lua/_prelude.lua).
        """
        return f"{self.base}:n"
