"""A job's stored audio: its file (in the audio store when one is set, else in Redis), its
segments, a document's parts, encoded pieces and cues; the store's objects written and swept."""

from __future__ import annotations

import contextlib
import re
import time
import uuid
from typing import Any

from core.audio.documents import FILE_PIECE_BYTES
from core.audio_store.base import AudioStore, StoreError
from core.infra.redis_client import RedisClient
from core.queue import scripts
from core.queue.keys import Keys

# An object younger than this is never swept: its job may be completing (written, not yet
# recorded). Completion follows the write within seconds; this leaves room for retries.
ORPHAN_GRACE_S = 600
SWEEP_BATCH = 200  # references read per round trip while sweeping
SWEPT_KINDS = frozenset({"jobs", "cache", "segments", "parts", "pieces"})  # what _new_key names
# Kinds of object kept as long as their job (a stale attempt's too): listed, not recorded alone.
_LISTED = ("segments", "parts", "pieces")


class StoredAudio:
    """What workers stored of each job's audio (the web tier serves it; it writes none)."""

    def __init__(self, redis: RedisClient, keys: Keys, store: AudioStore | None = None) -> None:
        self._redis, self._keys = redis, keys
        self.store = store
        self._chunk_read = scripts.Script(redis, "chunk_read")
        # The store may be shared by several queues: each keeps its objects under its own name.
        self._space = f"{keys.prefix}-{keys.queue}"
        # A segment's, part's or piece's entry in its list is its audio, or (with a store) the
        # key of its object, told apart by shape: a key is short ASCII no encoded audio spells.
        self._ref = re.compile(
            rb"%s/(segments|parts|pieces)/[0-9a-f]{32}/[0-9a-f]{32}\.[a-z0-9]{1,5}"
            % re.escape(self._space.encode())
        )

    async def _audio_ref(self, job_id: str) -> str | None:
        """The key of a finished job's file in the audio store (None: no store, or in Redis)."""
        if self.store is None:
            return None
        ref: Any = await self._redis.hget(self._keys.job(job_id), "audio_ref")
        return ref.decode() if ref else None

    async def file(self, job_id: str) -> bytes | None:
        """A finished job's whole file (not a document's: its parts are joined when served):
        from the audio store when its job records an object there, else from Redis (where audio
        lives without a store, and results made before one was set stay until they expire)."""
        if self.store is not None and (ref := await self._audio_ref(job_id)):
            return await self.store.get(ref)
        data: bytes | None = await self._redis.get(self._keys.audio(job_id))  # type: ignore[assignment]
        return data

    async def read_file(self, job_id: str, start: int, length: int) -> bytes | None:
        """`length` bytes of a finished job's file from `start` (None: it is gone), wherever it
        lives: a large file is sent piece by piece, never held whole."""
        if self.store is not None and (ref := await self._audio_ref(job_id)):
            return await self.store.read(ref, start, length)
        key = self._keys.audio(job_id)
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.exists(key)
            pipe.getrange(key, start, start + length - 1)
            exists, data = await pipe.execute()
        return data if exists else None

    async def local_path(self, job_id: str) -> str | None:
        """Where a finished job's file lies on this machine's disk (None: not in a directory
        store, or kept in Redis)."""
        ref = await self._audio_ref(job_id)
        return self.store.local_path(ref) if self.store is not None and ref else None

    async def link(
        self, job_id: str, expires_s: int, content_type: str, disposition: str
    ) -> str | None:
        """A presigned URL of a finished job's file in the store; None when its store signs no
        URLs or the file is not in the store (kept in Redis)."""
        if self.store is None or not (ref := await self._audio_ref(job_id)):
            return None
        return await self.store.presign(ref, expires_s, content_type, disposition)

    # -- the audio store's objects (workers write them; the completion script records them) --

    def _new_key(self, kind: str, owner: str, ext: str) -> str:
        # A fresh name per write: a stale attempt's object never replaces the current one's.
        return f"{self._space}/{kind}/{owner}/{uuid.uuid4().hex}.{ext}"

    async def put_file(self, job_id: str, ext: str, data: bytes) -> str:
        """Write a finished job's file to the store (StoreError on failure); its key."""
        return (await self.put_piece("jobs", job_id, ext, data)).decode()

    async def copy_for(self, kind: str, owner: str, source: str) -> str | None:
        """A copy of object `source` for a cache entry (`kind` "cache", `owner` its digest) or a
        job answered from the cache ("jobs", its id); None when `source` is gone."""
        assert self.store is not None
        ext = source.rsplit(".", 1)[-1]
        key = self._new_key(kind, owner, ext)
        return key if await self.store.copy(source, key) else None

    async def discard(self, *keys: str | None) -> None:
        """Remove objects nothing will record (best effort: what is left is the sweeper's)."""
        if self.store is not None:
            for key in keys:
                if key:
                    with contextlib.suppress(StoreError):
                        await self.store.delete(key)

    async def sweep(self, grace_s: float = ORPHAN_GRACE_S) -> int:
        """Remove this queue's objects that no job and no cache entry records any more (their
        job or entry expired, or a crash came between writing and recording): how many. Objects
        younger than `grace_s` stay."""
        if self.store is None:
            return 0
        now, removed = time.time(), 0
        batch: list[str] = []
        async for key, written in self.store.listing():
            ours = key.startswith(self._space + "/") and key.count("/") >= 3
            if ours and key.split("/")[1] in SWEPT_KINDS and now - written >= grace_s:
                batch.append(key)  # (anything else, a stray file say, is not ours to judge)
            if len(batch) >= SWEEP_BATCH:
                removed += await self._sweep(batch)
                batch = []
        return removed + (await self._sweep(batch) if batch else 0)

    async def _sweep(self, keys: list[str]) -> int:
        assert self.store is not None
        async with self._redis.pipeline(transaction=False) as pipe:
            for key in keys:
                _, kind, owner, _ = key.split("/", 3)
                if kind == "cache":
                    pipe.hget(self._keys.cache(owner), "audio_ref")
                elif kind == "jobs":
                    pipe.hget(self._keys.job(owner), "audio_ref")
                elif kind == "parts":  # kept as long as their list (it may go before its job)
                    pipe.exists(self._keys.parts(owner))
                else:  # a listed one: kept as long as its job (a stale attempt's too)
                    pipe.hget(self._keys.job(owner), "state")
            refs = await pipe.execute()
        gone = [
            key
            for key, ref in zip(keys, refs, strict=True)
            if (not ref if key.split("/")[1] in _LISTED else ref != key.encode())
        ]
        for key in gone:
            await self.store.delete(key)
        return len(gone)

    async def segments(self, job_id: str, start: int = 0) -> list[bytes]:
        """Encoded audio of the segments finished so far (index `start` onwards)."""
        entries: Any = await self._redis.lrange(self._keys.segments(job_id), start, -1)
        return [data for data in await self._resolve(entries) if data is not None]

    async def segment(self, job_id: str, n: int) -> bytes | None:
        """Segment `n` (1-based) of a streaming job, if finished."""
        entry: Any = await self._redis.lindex(self._keys.segments(job_id), n - 1)
        return (await self._resolve([entry]))[0] if entry is not None else None

    async def part(self, job_id: str, n: int) -> bytes | None:
        """Part `n` (1-based) of a document job: its PCM, the pause before it included."""
        entry: Any = await self._redis.lindex(self._keys.parts(job_id), n - 1)
        return (await self._resolve([entry]))[0] if entry is not None else None

    async def parts(self, job_id: str, first: int, last: int) -> list[bytes]:
        """A document's parts `first`..`last` (0-based, inclusive); a part gone from the store
        (expired under a read) ends the list there."""
        entries: Any = await self._redis.lrange(self._keys.parts(job_id), first, last)
        out: list[bytes] = []
        for data in await self._resolve(entries):
            if data is None:
                break
            out.append(data)
        return out

    async def _resolve(self, entries: list[bytes]) -> list[bytes | None]:
        """List entries as audio: an object's key is read from the store."""
        out: list[bytes | None] = []
        for entry in entries:
            if len(entry) > 200 or not self._ref.fullmatch(entry):
                out.append(entry)
            elif self.store is None:
                raise StoreError(
                    "this job's audio is in an audio store, and this process has none: set "
                    "CHATTTS_AUDIO_STORE as on the workers"
                )
            else:
                out.append(await self.store.get(entry.decode()))
        return out

    async def put_piece(self, kind: str, job_id: str, ext: str, data: bytes) -> bytes:
        """Write a segment ("segments"), a document's part ("parts") or piece ("pieces") to the
        store; the entry its list keeps (the object's key)."""
        assert self.store is not None
        key = self._new_key(kind, job_id, ext)
        await self.store.put(key, data)
        return key.encode()

    async def read_pieces(self, job_id: str, start: int, length: int) -> bytes | None:
        """`length` bytes from `start` of a document's encoded file (None: it is gone)."""
        first, last = start // FILE_PIECE_BYTES, (start + length - 1) // FILE_PIECE_BYTES
        entries: Any = await self._redis.lrange(self._keys.pieces(job_id), first, last)
        pieces = await self._resolve(entries)
        if len(pieces) != last - first + 1 or any(piece is None for piece in pieces):
            return None
        offset = start - first * FILE_PIECE_BYTES
        if len(pieces) == 1:  # a read that ends on a piece's end (web/replies/sending.py)
            return memoryview(pieces[0] or b"")[offset : offset + length].tobytes()
        joined = b"".join(piece for piece in pieces if piece is not None)
        return joined[offset : offset + length]

    async def has_pieces(self, job_id: str) -> bool:
        """Whether a document's encoded file is still kept (no piece is read)."""
        return bool(await self._redis.exists(self._keys.pieces(job_id)))

    async def discard_pieces(self, job_id: str, token: str) -> None:
        """Remove the attempt's draft of an encoded file (a failed try's, or one its completion
        refused) and, with a store, its objects (best effort: what is left is the sweeper's)."""
        draft = self._keys.pieces_draft(job_id, token)
        entries: Any = await self._redis.lrange(draft, 0, -1)
        await self._redis.delete(draft)
        refs = [e.decode() for e in entries if len(e) <= 200 and self._ref.fullmatch(e)]
        await self.discard(*refs)

    async def add_piece(
        self, job_id: str, token: str, data: bytes, ttl_s: int, first: bool = False
    ) -> None:
        """Append a piece of a document's encoded file to the attempt's draft (`first`: put it
        before the others); its completion makes it the job's, an abandoned draft expires after
        `ttl_s`. StoreError on failure."""
        entry = await self.put_piece("pieces", job_id, "bin", data) if self.store else data
        draft = self._keys.pieces_draft(job_id, token)
        async with self._redis.pipeline(transaction=False) as pipe:
            (pipe.lpush if first else pipe.rpush)(draft, entry)
            pipe.expire(draft, ttl_s)
            await pipe.execute()

    async def part_count(self, job_id: str) -> int:
        return int(await self._redis.llen(self._keys.parts(job_id)))

    async def cues(self, job_id: str) -> list[bytes]:
        """The job's subtitle cues as stored (JSON, one per segment or part)."""
        raw: Any = await self._redis.lrange(self._keys.cues(job_id), 0, -1)
        return list(raw)

    async def cached(self, digest: str) -> dict[bytes, bytes]:
        """The result cache's entry for `digest` (core/queue/cache.py), empty on a miss."""
        raw: Any = await self._redis.hgetall(self._keys.cache(digest))
        return dict(raw)

    async def chunks_of_run(self, job_id: str, start: int, stop: int) -> tuple[list[bytes], int]:
        """Chunks `start`..`stop` (0-based, inclusive) and the run of the job they belong to
        (its `starts`), in one atomic read."""
        keys = {"job": self._keys.job(job_id), "chunks": self._keys.chunks(job_id)}
        reply: list[Any] = await self._chunk_read(keys=keys, args={"first": start, "last": stop})
        return list(reply[1:]), int(reply[0])

    async def chunks(self, job_id: str, start: int, stop: int) -> list[bytes]:
        """Chunks `start`..`stop` (0-based, inclusive; -1: the last) of a streaming job."""
        out: list[bytes] = await self._redis.lrange(self._keys.chunks(job_id), start, stop)  # type: ignore[assignment]
        return out
