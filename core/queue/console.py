"""The operators' side of the queue: intake paused and resumed, dead letters requeued and purged,
workers asked to drain, the job index searched, usage and throughput tallies, the audit stream.

Every action is written to the audit stream in the same atomic step as the change it makes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

import orjson

from core.infra.redis_client import RedisClient
from core.queue.keys import AUDIT_MAXLEN, Keys
from core.queue.scripts import as_text

# Entries of the audit stream kept (about a year of a busy operator's actions).
# A drain request outlives a worker that never comes back to read it, but not by long.
DRAIN_TTL_S = 3_600
# Index entries looked at per search (a page of matches comes from at most this many jobs):
# a search of a rare text fragment costs bounded work, and says where to go on from.
SEARCH_SCAN = 5_000
SEARCH_BATCH = 200
# A job's text is searched in its first characters, kept apart at submit (enqueue.lua: `head`):
# a search reads no document's whole text, however many it looks at.
SEARCHED_CHARS = 1_000
# Dead letters read per look when purging some by job id (the stream keeps about 10,000).
PURGE_PAGE = 1_000
# What a listed job shows of a record (its text: a start, as the jobs list does).
LISTED_FIELDS = (
    "head",
    "id",
    "state",
    "client",
    "who",
    "voice",
    "lane",
    "created_at",
    "finished_at",
    "attempts",
    "starts",
    "error",
    "chars",
    "duration_s",
    "requeues",
    "document",
)


def _fields(raw: Any) -> dict[str, str]:
    return {as_text(k): as_text(v) for k, v in (raw or {}).items()}


@dataclass(frozen=True)
class Pause:
    by: str
    at: float
    reason: str
    retry_after_s: int

    def public(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class DeadLetter:
    entry: str  # its id in the dead-letter stream
    job_id: str
    reason: str
    at: float
    worker: str  # the worker that held it last ('' when none did)
    job: dict[str, str] | None  # the job's record now (None: expired)


class Console:
    """The operators' reads and actions on one queue; `by` names the operator (audit)."""

    def __init__(self, redis: RedisClient, keys: Keys) -> None:
        self._redis, self._keys = redis, keys

    # -- console sessions -------------------------------------------------------------------

    async def revoke_session(self, signature: str, expires: int) -> None:
        """A console session signed out: refused everywhere until it would have lapsed."""
        await self._redis.set(self._keys.revoked_session(signature), 1, exat=expires)

    async def session_revoked(self, signature: str) -> bool:
        return bool(await self._redis.exists(self._keys.revoked_session(signature)))

    # -- the audit stream -------------------------------------------------------------------

    def _audit(self, pipe: Any, by: str, action: str, target: str, detail: str = "") -> None:
        fields = {"by": by, "action": action, "target": target, "ts": time.time()}
        if detail:
            fields["detail"] = detail
        pipe.xadd(self._keys.audit, fields, maxlen=AUDIT_MAXLEN, approximate=True)

    async def audit_log(self, count: int, before: str | None = None) -> list[dict[str, Any]]:
        """The latest actions, newest first (strictly before entry `before`)."""
        entries: Any = await self._redis.xrevrange(
            self._keys.audit, max=f"({before}" if before else "+", min="-", count=count
        )
        out = []
        for entry_id, raw in entries:
            fields: dict[str, Any] = _fields(raw)
            fields["ts"] = float(fields.get("ts") or 0)
            out.append({"entry": as_text(entry_id), **fields})
        return out

    # -- intake -----------------------------------------------------------------------------

    async def paused(self) -> Pause | None:
        raw = _fields(await self._redis.hgetall(self._keys.paused))
        if "retry_after" not in raw:
            return None
        return Pause(
            raw.get("by", ""),
            float(raw.get("at") or 0),
            raw.get("reason", ""),
            int(raw["retry_after"]),
        )

    async def pause(self, by: str, reason: str, retry_after_s: int) -> Pause:
        """Refuse every new submission (enqueue.lua reads it in the same script), at once for
        every web process; jobs accepted before go on."""
        pause = Pause(by, time.time(), reason, retry_after_s)
        mapping = {"by": by, "at": pause.at, "reason": reason, "retry_after": retry_after_s}
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(self._keys.paused, mapping=mapping)  # type: ignore[arg-type]
            self._audit(pipe, by, "queue.pause", self._keys.queue, reason)
            await pipe.execute()
        return pause

    async def resume(self, by: str) -> bool:
        """Accept submissions again; False when intake was not paused."""
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.delete(self._keys.paused)
            self._audit(pipe, by, "queue.resume", self._keys.queue)
            removed, _ = await pipe.execute()
        return bool(removed)

    # -- dead letters -----------------------------------------------------------------------

    async def dead_letters(
        self, count: int, before: str | None = None
    ) -> tuple[list[DeadLetter], str | None]:
        """The newest dead letters (strictly before entry `before`) with their jobs' records,
        and the cursor of the next page (None: no more)."""
        entries: Any = await self._redis.xrevrange(
            self._keys.dlq, max=f"({before}" if before else "+", min="-", count=count
        )
        async with self._redis.pipeline(transaction=False) as pipe:
            for _, raw in entries:
                pipe.hmget(self._keys.job(as_text(raw.get(b"id", b""))), list(LISTED_FIELDS))
            records = await pipe.execute()
        letters = []
        for (entry_id, raw), values in zip(entries, records, strict=True):
            fields = _fields(raw)
            job = {
                n: as_text(v) for n, v in zip(LISTED_FIELDS, values, strict=True) if v is not None
            }
            letters.append(
                DeadLetter(
                    as_text(entry_id),
                    fields.get("id", ""),
                    fields.get("reason", ""),
                    float(fields.get("ts") or 0),
                    fields.get("worker", ""),
                    job or None,
                )
            )
        more = len(entries) == count
        return letters, (letters[-1].entry if more and letters else None)

    async def purge(self, job_ids: Iterable[str] | None, by: str) -> int:
        """Remove these jobs' dead letters (None: every one, at once); their records expire as
        any ended job's. The number removed."""
        dlq = self._keys.dlq
        if job_ids is None:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.xtrim(dlq, maxlen=0)
                self._audit(pipe, by, "dlq.purge", "all")
                removed, _ = await pipe.execute()
            return int(removed)
        wanted, doomed, after = set(job_ids), [], "-"
        while True:  # the stream a page at a time (it holds about DLQ_MAXLEN entries at most)
            entries: Any = await self._redis.xrange(dlq, min=after, max="+", count=PURGE_PAGE)
            doomed += [as_text(e) for e, raw in entries if as_text(raw.get(b"id", b"")) in wanted]
            if len(entries) < PURGE_PAGE:
                break
            after = f"({as_text(entries[-1][0])}"
        async with self._redis.pipeline(transaction=True) as pipe:
            if doomed:
                pipe.xdel(dlq, *doomed)
            self._audit(pipe, by, "dlq.purge", ",".join(sorted(wanted))[:512], f"{len(doomed)}")
            await pipe.execute()
        return len(doomed)

    # -- workers ----------------------------------------------------------------------------

    async def drain(self, worker: str, by: str) -> None:
        """Ask worker `worker` to stop taking work, finish what it holds and exit (it reads the
        request with its next heartbeat: fleet.py)."""
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.set(self._keys.drain(worker), by, ex=DRAIN_TTL_S)
            self._audit(pipe, by, "worker.drain", worker)
            await pipe.execute()

    # -- what the queue did -----------------------------------------------------------------

    async def usage(
        self, days: int, now: float | None = None
    ) -> dict[int, dict[str, dict[str, float]]]:
        """Each of the last `days` days (days since the epoch, UTC; today included): per client,
        its jobs ended, succeeded, characters and seconds of audio."""
        today = int((now or time.time()) // 86_400)
        wanted = list(range(today - days + 1, today + 1))
        hashes = await self._hashes([self._keys.tally(day) for day in wanted])
        out: dict[int, dict[str, dict[str, float]]] = {}
        for day, fields in zip(wanted, hashes, strict=True):
            clients: dict[str, dict[str, float]] = {}
            for field, value in fields.items():
                client, sep, measure = field.rpartition("|")
                if sep:
                    clients.setdefault(client, {})[measure] = float(value)
            if clients:
                out[day] = clients
        return out

    async def throughput(self, minutes: int, now: float | None = None) -> list[dict[str, float]]:
        """The jobs that ended in each of the last `minutes` minutes, oldest first, this one
        (under way) last."""
        this = int((now or time.time()) // 60)
        wanted = list(range(this - minutes + 1, this + 1))
        hashes = await self._hashes([self._keys.minute(minute) for minute in wanted])
        return [
            {
                "minute": minute * 60,
                "jobs": float(fields.get("jobs", 0)),
                "audio_s": float(fields.get("audio_s", 0)),
            }
            for minute, fields in zip(wanted, hashes, strict=True)
        ]

    async def _hashes(self, keys: list[str]) -> list[dict[str, str]]:
        """Every hash of `keys`, in one round trip."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.hgetall(key)
            raws = await pipe.execute()
        return [_fields(raw) for raw in raws]

    # -- jobs -------------------------------------------------------------------------------

    async def search(
        self,
        match: Callable[[dict[str, str]], bool],
        limit: int,
        since: float | None = None,
        until: float | None = None,
        text: str | None = None,
    ) -> tuple[list[dict[str, str]], float | None]:
        """Jobs submitted between `since` and `until` (newest first) whose listed fields
        `match(fields)` accepts and whose text holds `text` (any case): up to `limit`, after at
        most SEARCH_SCAN looked at; and the `until` of the next page (None: no more)."""
        top: Any = f"({until}" if until is not None else "+inf"
        bottom: Any = since if since is not None else "-inf"
        found: list[dict[str, str]] = []
        needle = text.casefold() if text else None
        fields = list(LISTED_FIELDS)
        scanned, last = 0, None
        while scanned < SEARCH_SCAN:
            ids: Any = await self._redis.zrevrangebyscore(
                self._keys.index, top, bottom, start=0, num=SEARCH_BATCH, withscores=True
            )
            async with self._redis.pipeline(transaction=False) as pipe:
                for job_id, _ in ids:
                    pipe.hmget(self._keys.job(as_text(job_id)), fields)
                rows = await pipe.execute()
            for (_, score), values in zip(ids, rows, strict=True):
                scanned, last = scanned + 1, float(score)
                record = {
                    n: as_text(v) for n, v in zip(fields, values, strict=True) if v is not None
                }
                if "state" not in record or not match(record):
                    continue  # expired, or not asked for
                if needle and needle not in record.get("head", "").casefold():
                    continue
                found.append(record)
                if len(found) == limit:
                    return found, last
            if len(ids) < SEARCH_BATCH:
                return found, None
            top = f"({last}"
        return found, last

    async def record(self, job_id: str) -> dict[str, Any] | None:
        """A job's whole record: its fields (its request parsed), its starts, its events, its
        pending callback and its dead letter, if any (None: unknown or expired)."""
        k = self._keys
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(k.job(job_id))
            pipe.lrange(k.runs(job_id), 0, -1)
            pipe.xrange(k.job_events(job_id), min="-", max="+", count=512)
            pipe.hget(k.callbacks, job_id)
            raw, runs, events, callback = await pipe.execute()
        fields: dict[str, Any] = _fields(raw)
        if not fields:
            return None
        request = fields.pop("request", "")
        fields["request"] = orjson.loads(request) if request else None
        # A fencing token, a client's key name, the text's start again.
        for hidden in ("token", "idem_key", "head"):
            fields.pop(hidden, None)
        letter = None
        if fields.get("dlq_entry"):
            entry = fields["dlq_entry"]
            found: Any = await self._redis.xrange(k.dlq, min=entry, max=entry)
            letter = {"entry": entry, **_fields(found[0][1])} if found else None
        return {
            "job": fields,
            "runs": [orjson.loads(r) for r in runs],
            "events": [
                {"id": as_text(i), **orjson.loads(f[b"data"])} for i, f in events if b"data" in f
            ],
            "callback": orjson.loads(callback) if callback else None,
            "dead_letter": letter,
        }
