"""The workers' side of the queue: take a job (fenced by its attempt), renew it, store its
segments and chunks, and end it (complete, finish, release), each step one Lua script."""

from __future__ import annotations

import time
from typing import Any

import orjson
from redis.commands.core import AsyncScript
from redis.exceptions import OutOfMemoryError, ResponseError

from core.infra.redis_client import RedisClient
from core.infra.settings import Settings
from core.queue.job import SynthesisRequest
from core.queue.keys import CHUNKS_LINGER_S, Keys
from core.queue.results import SegmentDone, Started

# How long a streaming job's chunk list outlives its last chunk: listeners read it live.
# Neither lane's share may be nothing: a weight of zero would stop its clock (take.lua).
MIN_SHARE = 0.01


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class WorkerSteps:
    """Mixed into the Queue, which provides the client, the keys and the loaded scripts."""

    _redis: RedisClient
    _scripts: dict[str, AsyncScript]
    settings: Settings
    keys: Keys

    # -- shared helpers ---------------------------------------------------------------------

    @property
    def _ttl(self) -> int:
        return self.settings.job_ttl_s

    @property
    def _maxlens(self) -> list[int]:
        return [self.settings.job_events_maxlen, self.settings.client_events_maxlen]

    async def _run(self, name: str, keys: list[str], args: list[Any]) -> Any:
        try:
            return await self._scripts[name](keys=keys, args=args)
        except ResponseError as exc:
            # A write refused inside a script that had started (Redis at its maxmemory) comes
            # back as the script's error: the same wait as a refused command, not a crash.
            if "OOM command not allowed" in str(exc) and not isinstance(exc, OutOfMemoryError):
                raise OutOfMemoryError(str(exc)) from exc
            raise

    # -- workers ----------------------------------------------------------------------------

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
        bulk_share = min(max(settings.bulk_min_share, MIN_SHARE), 1 - MIN_SHARE)
        bulk = count if bulk_room is None else bulk_room
        streams = count if stream_room is None else stream_room
        args = [worker, count, settings.fair_slice_s, bulk_share, bulk, streams]
        result = await self._run("take", [k.jobs_high, k.jobs, k.fair, k.wake], args)
        return [
            (_s(result[i]), _s(result[i + 1]), _s(result[i + 2]), _s(result[i + 3]))
            for i in range(0, len(result), 4)
        ]

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
            client = _s(stored) if stored is not None else ""
        owner = client
        result = await self._run(
            "start",
            [
                stream,
                k.job(job_id),
                k.job_events(job_id),
                k.client_events(owner),
                k.stats,
                k.dlq,
                k.active(owner),
                k.segments(job_id),
                k.chunks(job_id),
                k.cues(job_id),
            ],
            [
                job_id,
                entry,
                worker,
                time.time(),
                self.settings.max_deliveries,
                *self._maxlens,
                self._ttl,
            ],
        )
        if _s(result[0]) == "ok":
            return Started(
                _s(result[1]),
                SynthesisRequest.model_validate_json(result[2]),
                _s(result[3]),
                stream,
                document=_s(result[4]) == "1",
                segments_done=int(result[5]),
                samples_done=int(result[6]),
                attempt=int(result[7]),
                queued_at=float(result[8]),
                bulk=_s(result[9]) == "b",
                suspect=_s(result[10]) == "1",
            )
        return f"{_s(result[0])}:{_s(result[1])}"

    async def renew(self, job_id: str, token: str, worker: str, stream: str | None = None) -> str:
        """Renew a lease: 'ok', 'cancel' (stop at the next boundary) or 'lost' (reclaimed)."""
        keys = [stream or self.keys.jobs, self.keys.job(job_id)]
        return _s(await self._run("renew", keys, [token, worker]))

    async def progress(self, job_id: str, client: str, token: str, done: SegmentDone) -> str:
        """Store segment `done.index` (1-based, in order): 'ok', 'cancel', 'lost' or 'yield' (a
        document's slice ended while another client's work waits: release it, reason "")."""
        k = self.keys
        keys = [k.job(job_id), k.segments(job_id), k.job_events(job_id), k.client_events(client)]
        keys += [k.parts(job_id), k.cues(job_id)]
        args = [token, done.index, done.total, done.audio, done.duration_s, time.time()]
        args += [*self._maxlens, self._ttl, orjson.dumps(done.cue), done.samples]
        args += [done.sample_rate, done.eta or "", "1" if done.document else "0"]
        args += [self.settings.fair_slice_s if self.settings.fair_slice_s > 0 else ""]
        return _s(await self._run("progress", keys, args))

    async def chunk(
        self,
        job_id: str,
        token: str,
        index: int,
        segment: int,
        pcm: bytes,
        duration_s: float,
    ) -> str:
        """Append chunk `index` (1-based) of a streaming job: 'ok', 'cancel', 'lost' or 'full'
        (its chunks outgrew the chunk budget: not stored)."""
        k = self.keys
        return _s(
            await self._run(
                "chunk",
                [k.job(job_id), k.chunks(job_id), k.job_events(job_id)],
                [
                    token,
                    index,
                    segment,
                    pcm,
                    duration_s,
                    time.time(),
                    self.settings.job_events_maxlen,
                    CHUNKS_LINGER_S,
                    self.settings.stream_chunk_bytes,
                ],
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
        bytes) keeps its audio in its parts. `new_cues`: the cues no progress stored.
        `audio_ref`: the file is an object of the audio store, written before (its size is then
        `document_size`); `cache_ref`: the cache entry's own copy of it.
        """
        k = self.keys
        cache_mode = "off" if not cache_digest else ("hit" if cached else "miss")
        result = await self._run(
            "complete",
            [
                stream or k.jobs,
                k.job(job_id),
                k.audio(job_id),
                k.job_events(job_id),
                k.client_events(client),
                k.stats,
                k.active(client),
                k.segments(job_id),
                k.cache(cache_digest) if cache_digest else k.job(job_id),
                k.cues(job_id),
                k.parts(job_id),
            ],
            [
                token,
                audio,
                duration_s,
                sample_rate,
                time.time(),
                *self._maxlens,
                self._ttl,
                "1" if cached else "0",
                cache_mode,
                document_size if document_size is not None else "",
                orjson.dumps(new_cues) if new_cues else "",
                orjson.dumps(all_cues or []) if cache_mode == "miss" else "",  # for the cache
                audio_ref or "",
                cache_ref or "",
            ],
        )
        return _s(result[0]) == "ok"

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
        k = self.keys
        result = await self._run(
            "finish",
            [
                stream or k.jobs,
                k.job(job_id),
                k.job_events(job_id),
                k.client_events(client),
                k.stats,
                k.active(client),
            ],
            [token, state, error, time.time(), *self._maxlens, self._ttl],
        )
        return _s(result[0]) == "ok"

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
        k = self.keys
        result = await self._run(
            "release",
            [
                stream or k.jobs,
                k.job(job_id),
                k.job_events(job_id),
                k.client_events(client),
                k.stats,
            ],
            [token, time.time(), *self._maxlens, self._ttl, "1" if count_attempt else "0", reason],
        )
        return _s(result[0]) == "ok"
