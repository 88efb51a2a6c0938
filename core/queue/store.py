"""The queue API over Redis: every state change is one atomic Lua script (see lua/ beside it)."""

from __future__ import annotations

import time
from typing import Any

import orjson
from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.exceptions import ResponseError

from core.audio.sizes import stream_bytes
from core.audio_store.urls import open_store
from core.infra.redis_client import RedisClient, parse_url
from core.infra.settings import Settings
from core.queue import scripts
from core.queue.callbacks import Outbox
from core.queue.console import SEARCHED_CHARS, Console
from core.queue.durable import NotReplicated, run_replicated
from core.queue.events import Event, EventLog
from core.queue.fleet import Fleet
from core.queue.job import Job, SynthesisRequest, new_job_id, queue_position
from core.queue.keys import CONSUMER_GROUP, Keys
from core.queue.lanes import KeyShare, place
from core.queue.limits import Limits
from core.queue.pipelined import Pipelined
from core.queue.readings import Readings
from core.queue.reclaim import Reclaimer
from core.queue.results import (
    BacklogFull,
    BacklogShareFull,
    ClientCapReached,
    QueueError,
    QueuePaused,
    Room,
    SegmentDone,
    Started,
    StorageQuotaReached,
    StoreFull,
    StreamsFull,
    Submitted,
    Unreplicated,
)
from core.queue.retention import Retention
from core.queue.stored_audio import StoredAudio
from core.queue.voices import VoiceRegistry
from core.queue.worker_steps import WorkerSteps, _s

__all__ = [
    "BacklogFull",
    "BacklogShareFull",
    "ClientCapReached",
    "Queue",
    "QueueError",
    "QueuePaused",
    "Room",
    "SegmentDone",
    "Started",
    "StorageQuotaReached",
    "StoreFull",
    "StreamsFull",
    "Submitted",
    "Unreplicated",
]

SCRIPT_NAMES = (
    "enqueue",
    "take",
    "position",
    "start",
    "renew",
    "progress",
    "chunk",
    "complete",
    "finish",
    "release",
    "cancel",
    "requeue",
)


class Queue(WorkerSteps):
    """One queue (`settings.queue`) on one Redis client. Cheap to create; holds no connection.

    The clients' side is here (submit, read, cancel); the workers' (start to finish) is in
    worker_steps.py."""

    def __init__(self, redis: RedisClient, settings: Settings) -> None:
        self._redis = redis
        self.settings = settings
        self.keys = Keys(settings.key_prefix, settings.queue)
        # What the queue keeps besides its state changes, each read (or taken) through its own
        # part: no other module of either tier sends Redis a command of its own.
        self.events = EventLog(redis)
        self.stored = StoredAudio(
            redis, self.keys, open_store(settings.audio_store, settings.audio_store_timeout_s)
        )
        self.fleet = Fleet(redis, self.keys)
        self.voices = VoiceRegistry(redis, self.keys, settings)
        self.limits = Limits(redis, self.keys)
        self.outbox = Outbox(redis, self.keys)
        self.readings = Readings(redis, self.keys, self.fleet)
        sharded = parse_url(settings.redis_url).sharded if settings.redis_url else False
        self._scripts: dict[str, AsyncScript] = {
            name: scripts.register(redis, name, sharded) for name in SCRIPT_NAMES
        }
        self.console = Console(redis, self.keys)
        self.retention = Retention(redis, self.keys, sharded)
        # One server's client: the submissions of one turn of the loop share a write.
        self._pipelined: Pipelined | None = None
        if isinstance(redis, Redis) and not redis.single_connection_client:
            self._pipelined = Pipelined(redis)

    def reclaimer(self, consumer: str) -> Reclaimer:
        """What `consumer` (a worker) reclaims expired leases with, its cursors its own."""
        return Reclaimer(self._redis, self.keys, consumer, self.settings.lease_ms)

    async def _run_acknowledged(
        self, name: str, keys: list[str], args: list[Any], *changed: str
    ) -> Any:
        """A change that a client is told has happened (a submission, a cancel): confirmed by
        CHATTTS_REDIS_MIN_REPLICAS replicas first (NotReplicated otherwise) when the script's
        verdict is one of `changed`."""
        replicas = self.settings.redis_min_replicas
        if replicas <= 0 and self._pipelined is not None:
            return await self._pipelined.run(self._scripts[name], keys, args)
        return await run_replicated(
            self._redis,
            self._scripts[name],
            keys,
            args,
            self.settings.redis_min_replicas,
            self.settings.redis_replica_wait_ms,
            changed=lambda result: _s(result[0]) in changed,
        )

    async def aclose(self) -> None:
        """Close the queue's Redis client and its audio store (the process's last use)."""
        if self.stored.store is not None:
            await self.stored.store.aclose()
        await self._redis.aclose()

    async def ensure_group(self) -> None:
        """Create the consumer group (and stream) if missing; safe to call from every process."""
        for stream in self.keys.streams:
            try:
                await self._redis.xgroup_create(stream, CONSUMER_GROUP, id="0", mkstream=True)
            except ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise

    # -- clients ----------------------------------------------------------------------------

    async def enqueue(
        self,
        request: SynthesisRequest,
        client: str,
        idempotency_key: str | None = None,
        job_id: str | None = None,
        callback_url: str | None = None,
        document: bool = False,
        expected_bytes: int = 0,
        source: str | None = None,
        share: KeyShare | None = None,
        room: Room | None = None,
    ) -> Submitted:
        """Queue a job (`callback_url`: POSTed when it ends, see callbacks.py; `document`: its
        audio is kept in parts and a reclaimed attempt resumes after the last one; `source`: the
        address it came from, whose storage account it is charged to as well; `share`: its API
        key's weight under the fair scheduler, lanes.py; `room`: what the store and Redis can
        still take, as last sampled)."""
        job_id = job_id or new_job_id()
        k = self.keys
        idem = k.idem(client, idempotency_key) if idempotency_key else k.job(job_id)
        stream = k.stream(request.priority)
        other = k.jobs if stream == k.jobs_high else k.jobs_high
        keys = [stream, k.job(job_id), k.job_events(job_id), k.client_events(client), idem]
        keys += [k.active(client), k.stats, other, k.usage(client), k.usage_expiry(client)]
        account = f"address:{source}" if source else client
        keys += [k.usage(account), k.usage_expiry(account)]
        args = [job_id, client, request.model_dump_json(), time.time(), self._ttl]
        args += [self.settings.max_backlog, self.settings.max_active_per_client, *self._maxlens]
        args += [request.voice, request.format, "1" if idempotency_key else "0", callback_url or ""]
        args += ["1" if document else "0", expected_bytes, self.settings.storage_per_client_bytes]
        args += [self.settings.storage_per_address_bytes if source else 0, account]
        if self.settings.scheduler == "fair":
            at = place(self.settings, request, client, source, document, share)
            args += [at.lane, at.who, at.weight, round(at.cost, 3)]
        else:
            args += ["", "", 1, 0]
        args += [len(request.text), request.text[:SEARCHED_CHARS]]
        room = room or Room()
        chunk_bytes = stream_bytes(request.text, request.speed) if request.stream else 0
        args += ["" if room.store is None else room.store, chunk_bytes, room.chunk_budget]
        backlog_owner = client if client.startswith("key-") or not source else account
        args += [backlog_owner, self.settings.max_backlog_per_owner]
        try:
            result = await self._run_acknowledged("enqueue", keys, args, "ok", "dup")
        except NotReplicated as exc:
            raise Unreplicated(exc, job_id) from None
        status = _s(result[0])
        if status == "ok":
            return Submitted(
                _s(result[1]),
                _s(result[2]),
                duplicate=False,
                event=orjson.loads(result[3]),
                started_seq=int(result[4]),
                depth=int(result[5]),
                seq=int(result[6]),
                position=int(result[7]) if int(result[7]) >= 0 else None,
            )
        if status == "dup":
            return Submitted(_s(result[1]), None, duplicate=True)
        if status == "backlog":
            raise BacklogFull(int(result[1]))
        if status == "backlog_share":
            raise BacklogShareFull(int(result[1]), int(result[2]), backlog_owner == client)
        if status == "paused":
            raise QueuePaused(int(result[1]), _s(result[2]))
        if status == "storage":
            per = _s(result[3])
            quota = getattr(self.settings, f"storage_per_{per}_bytes")
            raise StorageQuotaReached(int(result[1]), expected_bytes, quota, int(result[2]), per)
        if status == "store_full":
            raise StoreFull(int(result[1]), int(result[2]), expected_bytes, room.where)
        if status == "streams_full":
            used, wait, per, budget = int(result[1]), int(result[2]), _s(result[3]), int(result[4])
            raise StreamsFull(used, chunk_bytes, budget, wait, per)
        raise ClientCapReached(int(result[1]))

    async def get(self, job_id: str) -> Job | None:
        fields: dict[bytes, bytes] = await self._redis.hgetall(self.keys.job(job_id))  # type: ignore[assignment]
        return Job.from_hash(fields) if fields else None

    async def get_many(self, job_ids: list[str]) -> list[Job | None]:
        """Each job of `job_ids` (None: unknown or expired), in one round trip."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for job_id in job_ids:
                pipe.hgetall(self.keys.job(job_id))
            found: list[dict[bytes, bytes]] = await pipe.execute()
        return [Job.from_hash(fields) if fields else None for fields in found]

    async def state(self, job_id: str) -> str | None:
        """The job's state alone (None: unknown or expired)."""
        raw = await self._redis.hget(self.keys.job(job_id), "state")
        return _s(raw) if raw is not None else None

    async def where(self, job_id: str, event_id: str | None) -> tuple[Event | None, int, int]:
        """For a submission's answer: the event `event_id` of the job (None: its latest), the
        job's submission number and the queue's count of started jobs, in one round trip."""
        stream = self.keys.job_events(job_id)
        async with self._redis.pipeline(transaction=False) as pipe:
            if event_id:
                pipe.xrange(stream, min=event_id, max=event_id)
            else:
                pipe.xrevrange(stream, max="+", min="-", count=1)
            pipe.hget(self.keys.job(job_id), "seq")
            pipe.hget(self.keys.stats, "started_seq")
            entries, seq, started = await pipe.execute()
        event = (_s(entries[0][0]), orjson.loads(entries[0][1][b"data"])) if entries else None
        return event, int(seq or 0), int(started or 0)

    async def held(self, job_ids: list[str]) -> list[tuple[str | None, str | None]]:
        """Each job's state and the worker holding it (None: none), in one round trip."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for job_id in job_ids:
                pipe.hmget(self.keys.job(job_id), ["state", "owner"])
            rows = await pipe.execute()
        return [(_s(s) if s else None, _s(o) if o else None) for s, o in rows]

    async def cancel(self, job_id: str, client: str | None = None) -> tuple[str, str | None]:
        """('cancelled'|'cancelling'|'terminal'|'missing'|'forbidden', terminal state if any);
        with `client`, only that client's job is cancelled (others are 'forbidden')."""
        k = self.keys
        client_field, stream_field = await self._redis.hmget(k.job(job_id), ["client", "stream"])
        owner = _s(client_field) if client_field is not None else ""
        keys = [_s(stream_field) if stream_field else k.jobs, k.job(job_id)]
        keys += [k.job_events(job_id), k.client_events(owner), k.stats, k.active(owner)]
        keys += [k.usage(owner), k.usage_expiry(owner)]
        args = [time.time(), *self._maxlens, self._ttl, client or ""]
        args += [min(self._ttl, self.settings.unstarted_ttl_s)]
        try:
            result = await self._run_acknowledged("cancel", keys, args, "cancelled", "cancelling")
        except NotReplicated as exc:
            raise Unreplicated(exc, job_id) from None
        return _s(result[0]), (_s(result[1]) if len(result) > 1 else None)

    async def requeue(self, job_id: str, by: str) -> tuple[str, str]:
        """An operator's requeue of a dead job (lua/requeue.lua): ('ok', event id) |
        ('missing', '') | ('not_dead', its state); confirmed by replicas as a submission is."""
        k = self.keys
        client = _s(await self._redis.hget(k.job(job_id), "client") or b"")
        keys = [k.job(job_id), k.job_events(job_id), k.client_events(client), k.stats]
        keys += [k.active(client), k.dlq, k.audit, k.parts(job_id), k.cues(job_id)]
        args = [job_id, time.time(), *self._maxlens, self._ttl, by]
        try:
            result = await self._run_acknowledged("requeue", keys, args, "ok")
        except NotReplicated as exc:
            raise Unreplicated(exc, job_id) from None
        return _s(result[0]), (_s(result[1]) if len(result) > 1 else "")

    async def position(self, job: Job) -> int:
        """Approximate number of jobs ahead of a queued job (0 = next)."""
        fair = int(await self._scripts["position"](keys=[self.keys.job(job.id)], args=[]))
        if fair >= 0:
            return fair
        started = await self._redis.hget(self.keys.stats, "started_seq")
        return queue_position(job.seq, int(started or 0))

    async def depth(self) -> int:
        """Jobs waiting or running: both streams' entries and the fair waiting room's jobs."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for stream in self.keys.streams:
                pipe.xlen(stream)
            pipe.hget(self.keys.fair, "queued")
            *lengths, queued = await pipe.execute()
        return sum(int(n) for n in lengths) + max(0, int(queued or 0))

    async def stats(self) -> dict[str, float]:
        raw = await self._redis.hgetall(self.keys.stats)
        return {_s(k): float(v) for k, v in raw.items()}
