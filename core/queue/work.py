"""The workers' side of the queue: take a job (fenced by its attempt), renew it, store its
segments and chunks, end it (complete, finish, release), each step one Lua script; and reclaim
the jobs of workers that stopped renewing them."""

from __future__ import annotations

import time
from typing import Any

import orjson

from core.infra.redis_client import RedisClient
from core.infra.settings import Settings
from core.queue.job import SynthesisRequest
from core.queue.keys import CHUNKS_LINGER_S, Keys
from core.queue.reclaim import Reclaimer
from core.queue.results import SegmentDone, Started
from core.queue.scripts import QueueScripts, as_text

# Neither lane's share may be nothing: a weight of zero would stop its clock (take.lua).
MIN_SHARE = 0.01


class Work:
    """The workers' side of one queue: each step of a job in hand, fenced by its attempt."""

    def __init__(
        self, redis: RedisClient, keys: Keys, settings: Settings, scripts: QueueScripts
    ) -> None:
        self._redis = redis
        self.keys = keys
        self.settings = settings
        self._scripts = scripts

    def _ending(self, job_id: str, client: str, stream: str | None) -> dict[str, str]:
        """The keys of every script that ends a run (complete, finish, release)."""
        k = self.keys
        return {
            "jobs": stream or k.jobs,
            "job": k.job(job_id),
            "ev_job": k.job_events(job_id),
            "ev_client": k.client_events(client),
            "stats": k.stats,
        }

    def reclaimer(self, consumer: str) -> Reclaimer:
        """What `consumer` (a worker) reclaims expired leases with, its cursors its own."""
        return Reclaimer(self._redis, self.keys, consumer, self.settings.worker.lease_ms)

    async def take(
        self,
        worker: str,
        count: int,
        bulk_room: int | None = None,
        stream_room: int | None = None,
    ) -> list[tuple[str, str, str, str]]:
        """Up to `count` jobs delivered to `worker`, in the scheduler's order (lua/take.lua), of
        which at most `bulk_room` bulk ones and `stream_room` streamed ones from the waiting
        room (None: any): [(stream, entry id, job id, client)], to `start` each."""
        k, settings = self.keys, self.settings
        bulk_share = min(max(settings.scheduling.bulk_min_share, MIN_SHARE), 1 - MIN_SHARE)
        bulk = count if bulk_room is None else bulk_room
        streams = count if stream_room is None else stream_room
        keys = {"high": k.jobs_high, "normal": k.jobs, "fair": k.fair, "wake_list": k.wake}
        args = {
            "worker": worker,
            "count": count,
            "slice_s": settings.scheduling.fair_slice_s,
            "bulk_share": bulk_share,
            "bulk_room": bulk,
            "stream_room": streams,
        }
        found = [as_text(value) for value in await self._scripts.run("take", keys, args)]
        return list(zip(found[::4], found[1::4], found[2::4], found[3::4], strict=True))

    async def wait_for_work(self, timeout_s: float) -> bool:
        """Block until work may have arrived (the wake list, pushed by every enqueue and
        release) or `timeout_s` passed; True when woken."""
        woken = await self._redis.blpop([self.keys.wake], timeout=max(timeout_s, 0.01))
        return woken is not None

    async def start(
        self,
        job_id: str,
        entry: str,
        worker: str,
        stream: str | None = None,
        client: str | None = None,
    ) -> Started | str:
        """Take an entry delivered from `stream`. Returns Started, or why it was skipped.

        `client` comes with the stream entry; without it, it is read from the job hash.
        """
        k = self.keys
        stream = stream or k.jobs
        if client is None:
            stored = await self._redis.hget(k.job(job_id), "client")
            client = as_text(stored) if stored is not None else ""
        result = await self._scripts.run(
            "start",
            {
                "jobs": stream,
                "job": k.job(job_id),
                "ev_job": k.job_events(job_id),
                "ev_client": k.client_events(client),
                "stats": k.stats,
                "dlq": k.dlq,
                "active": k.active(client),
                "segments": k.segments(job_id),
                "chunks": k.chunks(job_id),
                "cues": k.cues(job_id),
            },
            self._scripts.stamped(
                {
                    "id": job_id,
                    "entry": entry,
                    "worker": worker,
                    "max_deliveries": self.settings.worker.max_deliveries,
                }
            ),
        )
        if as_text(result[0]) == "ok":
            return Started(
                as_text(result[1]),
                SynthesisRequest.model_validate_json(result[2]),
                as_text(result[3]),
                stream,
                document=as_text(result[4]) == "1",
                segments_done=int(result[5]),
                samples_done=int(result[6]),
                attempt=int(result[7]),
                queued_at=float(result[8]),
                bulk=as_text(result[9]) == "b",
                suspect=as_text(result[10]) == "1",
            )
        return f"{as_text(result[0])}:{as_text(result[1])}"

    async def renew(self, job_id: str, token: str, worker: str, stream: str | None = None) -> str:
        """Renew a lease: 'ok', 'cancel' (stop at the next boundary) or 'lost' (reclaimed)."""
        keys = {"jobs": stream or self.keys.jobs, "job": self.keys.job(job_id)}
        return as_text(await self._scripts.run("renew", keys, {"token": token, "worker": worker}))

    async def remake(self, job_id: str, token: str, seconds: float) -> bool:
        """A segment is made again: its `seconds` of speech charged to its client's fair-share
        pass (lua/remake.lua); False when nothing was charged (FIFO, or the lease is gone)."""
        keys = {"job": self.keys.job(job_id)}
        args = {"token": token, "charge": max(seconds, 0.0)}
        return bool(await self._scripts.run("remake", keys, args))

    async def progress(self, job_id: str, client: str, token: str, done: SegmentDone) -> str:
        """Store segment `done.index` (1-based, in order): 'ok', 'cancel', 'lost' or 'yield' (a
        document's slice ended while another client's work waits: release it, reason "")."""
        k = self.keys
        keys = {
            "job": k.job(job_id),
            "segments": k.segments(job_id),
            "ev_job": k.job_events(job_id),
            "ev_client": k.client_events(client),
            "parts": k.parts(job_id),
            "cues": k.cues(job_id),
        }
        args = {
            "token": token,
            "index": done.index,
            "total": done.total,
            "audio": done.audio,
            "duration_s": done.duration_s,
            "cue": orjson.dumps(done.cue),
            "samples": done.samples,
            "sample_rate": done.sample_rate,
            "eta": done.eta or "",
            "document": "1" if done.document else "0",
            "slice_s": self.settings.scheduling.fair_slice_s
            if self.settings.scheduling.fair_slice_s > 0
            else "",
        }
        return as_text(await self._scripts.run("progress", keys, self._scripts.stamped(args)))

    async def chunk(
        self,
        job_id: str,
        token: str,
        index: int,
        segment: int,
        pcm: bytes,
        duration_s: float,
        last: bool = False,
    ) -> str:
        """Append chunk `index` (1-based) of a streaming job (`last`: its last one): 'ok',
        'cancel', 'lost' or 'full' (its chunks outgrew the chunk budget: not stored)."""
        k = self.keys
        return as_text(
            await self._scripts.run(
                "chunk",
                {"job": k.job(job_id), "chunks": k.chunks(job_id), "ev_job": k.job_events(job_id)},
                {
                    "token": token,
                    "index": index,
                    "segment": segment,
                    "pcm": pcm,
                    "duration_s": duration_s,
                    "now": time.time(),
                    "maxlen_job": self.settings.redis.job_events_maxlen,
                    "linger": CHUNKS_LINGER_S,
                    "budget": self.settings.limits.stream_chunk_bytes,
                    "last": "1" if last else "0",
                },
            )
        )

    async def complete(
        self,
        job_id: str,
        client: str,
        token: str,
        audio: bytes,
        duration_s: float,
        sample_rate: int,
        cached: bool = False,
        stream: str | None = None,
        cache_digest: str | None = None,
        document_size: int | None = None,
        new_cues: list[dict[str, Any]] | None = None,
        all_cues: list[dict[str, Any]] | None = None,
        audio_ref: str | None = None,
        cache_ref: str | None = None,
    ) -> bool:
        """Store the result and finish the job; False when the token is stale (fenced).

        With `cache_digest`, the result also goes into the result cache (or, when `cached`,
        counts as a cache hit), with `all_cues`. A document (`document_size`: its file's
        bytes) keeps its audio in its parts, or its file in the pieces this attempt encoded from
        them (`Keys.pieces_draft`; its parts then linger PARTS_LINGER_S). `new_cues`: the cues
        no progress stored.
        `audio_ref`: the file is an object of the audio store, written before (its size is then
        `document_size`); `cache_ref`: the cache entry's own copy of it.
        """
        k = self.keys
        cache_mode = "off" if not cache_digest else ("hit" if cached else "miss")
        result = await self._scripts.run(
            "complete",
            {
                **self._ending(job_id, client, stream),
                "audio_key": k.audio(job_id),
                "active": k.active(client),
                "segments": k.segments(job_id),
                "cache": k.cache(cache_digest) if cache_digest else k.job(job_id),
                "cues": k.cues(job_id),
                "parts": k.parts(job_id),
                "pieces": k.pieces(job_id),
                "draft": k.pieces_draft(job_id, token),
            },
            self._scripts.stamped(
                {
                    "token": token,
                    "audio": audio,
                    "duration_s": duration_s,
                    "sample_rate": sample_rate,
                    "cached": "1" if cached else "0",
                    "cache_mode": cache_mode,
                    "audio_size": document_size if document_size is not None else "",
                    "new_cues": orjson.dumps(new_cues) if new_cues else "",
                    # Every cue, for the cache.
                    "all_cues": orjson.dumps(all_cues or []) if cache_mode == "miss" else "",
                    "audio_ref": audio_ref or "",
                    "cache_ref": cache_ref or "",
                }
            ),
        )
        return as_text(result[0]) == "ok"

    async def finish(
        self,
        job_id: str,
        client: str,
        token: str,
        state: str,
        error: str,
        stream: str | None = None,
    ) -> bool:
        """End a running job as 'failed' or 'cancelled'; False when the token is stale."""
        result = await self._scripts.run(
            "finish",
            {**self._ending(job_id, client, stream), "active": self.keys.active(client)},
            self._scripts.stamped({"token": token, "ending": state, "error": error}),
        )
        return as_text(result[0]) == "ok"

    async def release(
        self,
        job_id: str,
        client: str,
        token: str,
        reason: str,
        count_attempt: bool = False,
        stream: str | None = None,
    ) -> bool:
        """Give a running job back to the queue; False when the token is stale."""
        count = "1" if count_attempt else "0"
        result = await self._scripts.run(
            "release",
            self._ending(job_id, client, stream),
            self._scripts.stamped({"token": token, "count": count, "reason": reason}),
        )
        return as_text(result[0]) == "ok"
