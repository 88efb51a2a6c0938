"""The queue API over Redis: every state change is one atomic Lua script (see lua/ beside it)."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
from redis.exceptions import ResponseError

from core.audio.sizes import stream_bytes
from core.audio_store.urls import open_store
from core.infra.redis_client import RedisClient
from core.infra.settings import Settings
from core.queue.callbacks import Outbox
from core.queue.console import SEARCHED_CHARS, Console
from core.queue.durable import NotReplicated
from core.queue.events import Event, EventLog
from core.queue.fleet import Fleet
from core.queue.job import Job, SynthesisRequest, new_job_id, queue_position
from core.queue.keys import CONSUMER_GROUP, Keys
from core.queue.lanes import KeyShare, place
from core.queue.limits import Limits
from core.queue.readings import Readings
from core.queue.results import (
    BacklogFull,
    BacklogShareFull,
    ClientCapReached,
    IdempotencyKeyReused,
    QueueError,
    QueuePaused,
    Room,
    Started,
    StorageQuotaReached,
    StoreFull,
    StreamsFull,
    Submitted,
    Unreplicated,
)
from core.queue.retention import Retention
from core.queue.scripts import QueueScripts, as_text
from core.queue.stored_audio import StoredAudio
from core.queue.voices import VoiceRegistry
from core.queue.work import Work

# Started stays importable from here for bench/console.py; the rest come from results.py.
__all__ = ["Queue", "Started"]


class Queue:
    """One queue (`settings.redis.queue`) on one Redis client. Cheap to create; holds no connection.

    The clients' side is here (submit, read, cancel); the workers' (start to finish) is its
    `work` (work.py), over the same scripts."""

    def __init__(self, redis: RedisClient, settings: Settings) -> None:
        self._redis = redis
        self.settings = settings
        self.keys = Keys(settings.redis.key_prefix, settings.redis.queue)
        # What the queue keeps besides its state changes, each read (or taken) through its own
        # part: no other module of either tier sends Redis a command of its own.
        self.events = EventLog(redis)
        self.stored = StoredAudio(
            redis,
            self.keys,
            open_store(settings.store.audio_store, settings.store.audio_store_timeout_s),
        )
        self.fleet = Fleet(redis, self.keys)
        self.voices = VoiceRegistry(redis, self.keys, settings)
        self.limits = Limits(redis, self.keys)
        self.outbox = Outbox(redis, self.keys)
        self.readings = Readings(redis, self.keys, self.fleet)
        self._scripts = QueueScripts(redis, settings)
        # The workers' side: each step of a job a worker holds (work.py).
        self.work = Work(redis, self.keys, settings, self._scripts)
        self.console = Console(redis, self.keys)
        self.retention = Retention(redis, self.keys, self._scripts.sharded)

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
        job_id = new_job_id()
        settings = self.settings
        if request.priority == "high" and not client.startswith("key-"):
            # Ahead of everyone is for API keys: a protocol that asks it for an anonymous
            # caller (OpenAI's, ChatTTS-ui's) gets the ordinary lane.
            request = request.model_copy(update={"priority": "normal"})
        request_json = request.model_dump_json()
        account = f"address:{source}" if source else client
        keys = self._submission_keys(job_id, client, account, request.priority, idempotency_key)
        fair = settings.scheduling.scheduler == "fair"
        at = place(settings, request, client, source, document, share) if fair else None
        room = room or Room()
        chunk_bytes = stream_bytes(request.text, request.speed) if request.stream else 0
        backlog_owner = client if client.startswith("key-") or not source else account
        args = {
            "id": job_id,
            "client": client,
            "request": request_json,
            "max_backlog": settings.limits.max_backlog,
            "max_active": settings.limits.max_active_per_client,
            "voice": request.voice,
            "format": request.format,
            "has_idem": "1" if idempotency_key else "0",
            "fingerprint": _fingerprint(request_json, callback_url) if idempotency_key else "",
            "callback_url": callback_url or "",
            "document": "1" if document else "0",
            "bytes": expected_bytes,
            "client_quota": settings.limits.storage_per_client_bytes,
            "source_quota": settings.limits.storage_per_address_bytes if source else 0,
            "source_account": account,
            "lane": at.lane if at else "",
            "who": at.who if at else "",
            "weight": at.weight if at else 1,
            "cost": round(at.cost, 3) if at else 0,
            "chars": len(request.text),
            "head": request.text[:SEARCHED_CHARS],
            "store_room": "" if room.store is None else room.store,
            "chunk_bytes": chunk_bytes,
            "chunk_budget": room.chunk_budget,
            "backlog_owner": backlog_owner,
            "backlog_share": settings.limits.max_backlog_per_owner,
        }
        args = self._scripts.stamped(args)
        result = await self._acknowledged(job_id, "enqueue", keys, args, "ok", "dup")
        status = as_text(result[0])
        if status == "idem_mismatch":
            raise IdempotencyKeyReused(as_text(result[1]))
        if status not in ("ok", "dup"):
            raise self._refusal(result, expected_bytes, chunk_bytes, room, backlog_owner == client)
        if status == "ok":
            return Submitted(
                as_text(result[1]),
                as_text(result[2]),
                duplicate=False,
                event=orjson.loads(result[3]),
                started_seq=int(result[4]),
                depth=int(result[5]),
                seq=int(result[6]),
                position=int(result[7]) if int(result[7]) >= 0 else None,
            )
        return Submitted(as_text(result[1]), None, duplicate=True)

    def _submission_keys(
        self, job_id: str, client: str, account: str, priority: str, idempotency_key: str | None
    ) -> dict[str, str]:
        """enqueue.lua's keys: the job's, its client's and its storage accounts'."""
        k = self.keys
        stream = k.stream(priority)
        return {
            "jobs": stream,
            "job": k.job(job_id),
            "ev_job": k.job_events(job_id),
            "ev_client": k.client_events(client),
            "idem": k.idem(client, idempotency_key) if idempotency_key else k.job(job_id),
            "active": k.active(client),
            "stats": k.stats,
            "other_jobs": k.jobs if stream == k.jobs_high else k.jobs_high,
            "usage": k.usage(client),
            "usage_expiry": k.usage_expiry(client),
            "source_usage": k.usage(account),
            "source_expiry": k.usage_expiry(account),
        }

    def _refusal(
        self, result: Any, expected_bytes: int, chunk_bytes: int, room: Room, own_share: bool
    ) -> QueueError:
        """What enqueue.lua's refusal says, as the error the client is answered with."""
        status = as_text(result[0])
        if status == "backlog":
            return BacklogFull(int(result[1]))
        if status == "backlog_share":
            return BacklogShareFull(int(result[1]), int(result[2]), own_share, int(result[3]))
        if status == "paused":
            return QueuePaused(int(result[1]), as_text(result[2]))
        if status == "storage":
            per = as_text(result[3])
            quota = self.settings.value(f"storage_per_{per}_bytes")
            return StorageQuotaReached(int(result[1]), expected_bytes, quota, int(result[2]), per)
        if status == "store_full":
            return StoreFull(int(result[1]), int(result[2]), expected_bytes, room.where)
        if status == "streams_full":
            used, wait, per = int(result[1]), int(result[2]), as_text(result[3])
            return StreamsFull(used, chunk_bytes, int(result[4]), wait, per)
        return ClientCapReached(int(result[1]))

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
        return as_text(raw) if raw is not None else None

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
        event = (as_text(entries[0][0]), orjson.loads(entries[0][1][b"data"])) if entries else None
        return event, int(seq or 0), int(started or 0)

    async def held(self, job_ids: list[str]) -> list[tuple[str | None, str | None]]:
        """Each job's state and the worker holding it (None: none), in one round trip."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for job_id in job_ids:
                pipe.hmget(self.keys.job(job_id), ["state", "owner"])
            rows = await pipe.execute()
        return [(as_text(s) if s else None, as_text(o) if o else None) for s, o in rows]

    async def cancel(self, job_id: str, client: str | None = None) -> tuple[str, str | None]:
        """('cancelled'|'cancelling'|'terminal'|'missing'|'forbidden', terminal state if any);
        with `client`, only that client's job is cancelled (others are 'forbidden')."""
        k = self.keys
        client_field, stream_field = await self._redis.hmget(k.job(job_id), ["client", "stream"])
        owner = as_text(client_field) if client_field is not None else ""
        keys = {
            "jobs": as_text(stream_field) if stream_field else k.jobs,
            "job": k.job(job_id),
            "ev_job": k.job_events(job_id),
            "ev_client": k.client_events(owner),
            "stats": k.stats,
            "active": k.active(owner),
            "usage": k.usage(owner),
            "usage_expiry": k.usage_expiry(owner),
        }
        args = self._scripts.stamped(
            {
                "client": client or "",
                "unstarted_ttl": min(self._scripts.ttl, self.settings.redis.unstarted_ttl_s),
            }
        )
        result = await self._acknowledged(job_id, "cancel", keys, args, "cancelled", "cancelling")
        return as_text(result[0]), (as_text(result[1]) if len(result) > 1 else None)

    async def requeue(self, job_id: str, by: str) -> tuple[str, str]:
        """An operator's requeue of a dead job (lua/requeue.lua): ('ok', event id) |
        ('missing', '') | ('not_dead', its state); confirmed by replicas as a submission is."""
        k = self.keys
        client = as_text(await self._redis.hget(k.job(job_id), "client") or b"")
        keys = {
            "job": k.job(job_id),
            "ev_job": k.job_events(job_id),
            "ev_client": k.client_events(client),
            "stats": k.stats,
            "active": k.active(client),
            "dlq": k.dlq,
            "audit": k.audit,
            "parts": k.parts(job_id),
            "cues": k.cues(job_id),
        }
        args = self._scripts.stamped({"id": job_id, "by": by})
        result = await self._acknowledged(job_id, "requeue", keys, args, "ok")
        return as_text(result[0]), (as_text(result[1]) if len(result) > 1 else "")

    async def _acknowledged(
        self, job_id: str, name: str, keys: dict[str, Any], args: dict[str, Any], *changed: str
    ) -> Any:
        """run_acknowledged (scripts.py), too few replicas answered as Unreplicated for `job_id`."""
        try:
            return await self._scripts.run_acknowledged(name, keys, args, *changed)
        except NotReplicated as exc:
            raise Unreplicated(exc, job_id) from None

    async def position(self, job: Job) -> int:
        """Approximate number of jobs ahead of a queued job (0 = next)."""
        fair = int(await self._scripts.run("position", {"job": self.keys.job(job.id)}, {}))
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
        return {as_text(k): float(v) for k, v in raw.items()}


def _fingerprint(request_json: str, callback_url: str | None) -> str:
    """What an Idempotency-Key stands for: the request it was first sent with."""
    digest = hashlib.sha256(f"{request_json}\n{callback_url or ''}".encode())
    return digest.hexdigest()[:24]
