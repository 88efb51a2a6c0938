"""What the queue's state reads at a glance, for probes and metrics: each stream's backlog, lag
and pending entries, the dead letters, the outcome counters, the store's memory and replication.

Every web process reads the same cluster-wide values (the Lua scripts of every worker count into
the queue's `stats` hash).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from core.infra.redis_client import RedisClient, target_of
from core.infra.topology import report
from core.queue.fleet import Fleet
from core.queue.job import TERMINAL_NAMES
from core.queue.keys import CONSUMER_GROUP, Keys
from core.queue.lanes import BULK, INTERACTIVE, STREAM

# The fair waiting room's lanes as the metrics name them.
LANES = {"interactive": INTERACTIVE, "bulk": BULK, "stream": STREAM}


def _id_age_s(entry_id: bytes | str | None, now: float) -> float:
    """Age of a stream entry from its id (milliseconds since the epoch, a dash, a sequence)."""
    if not entry_id:
        return 0.0
    text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    return max(0.0, now - int(text.split("-", 1)[0]) / 1000)


@dataclass
class StreamReading:
    length: int = 0
    pending: int = 0
    lag: int = 0
    oldest_pending_age_s: float = 0.0
    oldest_waiting_age_s: float = 0.0


@dataclass
class StreamsReading:
    """The fleet's streams: what its live workers carry in real time now (their heartbeats)."""

    capacity: int = 0  # streams the workers carry at once, each ahead of its listener
    playing: int = 0  # streamed jobs in the workers' hands
    waiting: int = 0  # streamed jobs waiting for a worker with room (the autoscaling signal)
    below_realtime: int = 0  # workers that cannot carry even one stream in real time

    @classmethod
    def of(cls, beats: list[dict[str, Any]], waiting: int) -> StreamsReading:
        reading = cls(waiting=waiting)
        for beat in beats:
            streams = beat.get("streams")
            if not isinstance(streams, dict):
                continue  # a worker of a version that does not say
            reading.capacity += int(streams.get("capacity") or 0)
            reading.playing += int(streams.get("playing") or 0)
            speed = streams.get("speed")
            reading.below_realtime += speed is not None and not streams.get("capacity")
        return reading

    def public(self) -> dict[str, int]:
        return {
            "capacity": self.capacity,
            "playing": self.playing,
            "waiting": self.waiting,
            "workers_below_realtime": self.below_realtime,
        }


@dataclass
class QueueReading:
    streams: dict[str, StreamReading] = field(default_factory=dict)
    dead_letters: int = 0
    stats: dict[str, float] = field(default_factory=dict)
    workers_alive: int = 0
    # The fair waiting room, by lane ("interactive", "bulk", "stream"): jobs, and clients.
    waiting: dict[str, int] = field(default_factory=dict)
    waiting_clients: dict[str, int] = field(default_factory=dict)
    oldest_waiting_age_s: dict[str, float] = field(default_factory=dict)
    streams_fleet: StreamsReading = field(default_factory=StreamsReading)
    # Today's usage (UTC) by client: each API key's client apart, every other client in
    # `others` (a bounded label set); measures: jobs, ok, chars, audio_s.
    usage_today: dict[str, dict[str, float]] = field(default_factory=dict)
    paused: bool = False

    @property
    def backlog(self) -> int:
        """Jobs accepted and not finished: the streams' entries and the waiting room's jobs."""
        return sum(s.length for s in self.streams.values()) + sum(self.waiting.values())


async def _read_stream(redis: RedisClient, stream: str, now: float) -> StreamReading:
    async with redis.pipeline(transaction=False) as pipe:
        pipe.xlen(stream)
        pipe.xinfo_groups(stream)
        pipe.xpending(stream, CONSUMER_GROUP)
        length, groups, pending = await pipe.execute(raise_on_error=False)
    if isinstance(length, Exception):
        raise length
    reading = StreamReading(length=int(length))
    if isinstance(groups, Exception) or isinstance(pending, Exception):
        # No stream or no group yet: nothing was ever read, everything waits.
        reading.lag = reading.length
        first: Any = await redis.xrange(stream, count=1)
        reading.oldest_waiting_age_s = _id_age_s(first[0][0] if first else None, now)
        return reading
    group = next((g for g in groups if _text(g.get("name")) == CONSUMER_GROUP), None)
    reading.pending = int(pending.get("pending") or 0)
    reading.oldest_pending_age_s = _id_age_s(pending.get("min"), now) if reading.pending else 0.0
    # Entries leave the stream when their job ends, so what is not pending waits. (XINFO's own
    # `lag` is nil after deletions in the middle of the stream, which is our normal case.)
    reading.lag = max(0, reading.length - reading.pending)
    if reading.lag and group is not None:
        last = _text(group.get("last-delivered-id")) or "0-0"
        nxt: Any = await redis.xrange(stream, min=f"({last}", count=1)
        reading.oldest_waiting_age_s = _id_age_s(nxt[0][0] if nxt else None, now)
    return reading


def _text(value: Any) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


@dataclass
class StoreSample:
    """One sample of the store, for the web tier's once-a-second monitor."""

    finished: int  # jobs ended, all outcomes
    depth: int  # entries of the bulk stream (waiting or running)
    depth_high: int  # entries of the interactive stream
    in_hand: int  # entries workers hold (pending), both streams
    waiting: int  # jobs in the fair waiting room (no stream entry yet)
    memory: dict[str, Any]  # INFO memory
    replication: dict[str, Any]  # INFO replication


class Readings:
    """Reads of one queue's state as a whole (no job's)."""

    def __init__(self, redis: RedisClient, keys: Keys, fleet: Fleet) -> None:
        self._redis, self._keys, self._fleet = redis, keys, fleet

    async def queue(self, usage: bool = True) -> QueueReading:
        """The queue at a glance; `usage`: today's tally too (up to thousands of fields: the
        metrics' scrape wants it, the console's live view does not)."""
        now = time.time()
        reading = QueueReading()
        for stream in self._keys.streams:
            label = "jobs_high" if stream == self._keys.jobs_high else "jobs"
            reading.streams[label] = await _read_stream(self._redis, stream, now)
        reading.dead_letters = int(await self._redis.xlen(self._keys.dlq))
        raw = await self._redis.hgetall(self._keys.stats)
        reading.stats = {_text(k) or "": float(v) for k, v in raw.items()}
        beats = await self._fleet.heartbeats()
        reading.workers_alive = len(beats)
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hmget(self._keys.fair, [f"n:{lane}" for lane in LANES.values()])
            for lane in LANES.values():
                pipe.zcard(self._keys.lane(lane))
                pipe.zrange(self._keys.since(lane), 0, 0, withscores=True)
            counts, *per_lane = await pipe.execute()
        for i, (name, _) in enumerate(LANES.items()):
            n_clients, oldest = per_lane[2 * i], per_lane[2 * i + 1]
            reading.waiting[name] = max(0, int(counts[i] or 0))
            reading.waiting_clients[name] = int(n_clients)
            reading.oldest_waiting_age_s[name] = max(0.0, now - oldest[0][1]) if oldest else 0.0
        reading.streams_fleet = StreamsReading.of(beats, reading.waiting["stream"])
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.exists(self._keys.paused)
            if usage:
                pipe.hgetall(self._keys.tally(int(now // 86_400)))
            paused, *tallied = await pipe.execute()
        reading.paused = bool(paused)
        tally = tallied[0] if tallied else {}
        for name, value in tally.items():
            client, sep, measure = (_text(name) or "").rpartition("|")
            if sep:
                label = client if client.startswith("key-") else "others"
                measures = reading.usage_today.setdefault(label, {})
                measures[measure] = measures.get(measure, 0.0) + float(value)
        return reading

    async def streams(self, beats: list[dict[str, Any]]) -> StreamsReading:
        """The fleet's streams, from these heartbeats and the stream lane's waiting jobs."""
        waiting = await self._redis.hget(self._keys.fair, f"n:{STREAM}")
        return StreamsReading.of(beats, max(0, int(waiting or 0)))

    async def sample(self) -> StoreSample:
        """Finished jobs, depths, memory and replication in one round trip (three on a cluster,
        whose pipelines carry no INFO)."""
        redis, keys = self._redis, self._keys
        node = await target_of(redis, keys.jobs)  # in a cluster: the queue's shard
        async with redis.pipeline(transaction=False) as pipe:
            pipe.hmget(keys.stats, list(TERMINAL_NAMES))
            pipe.xlen(keys.jobs)
            pipe.xlen(keys.jobs_high)
            pipe.hget(keys.fair, "queued")
            if not node:  # a cluster pipeline carries no INFO: asked apart below
                pipe.info("memory")
                pipe.info("replication")
            for stream in keys.streams:
                pipe.xpending(stream, CONSUMER_GROUP)
            # No consumer group yet (no worker ever started) is not an outage: errors of the
            # XPENDINGs count as nothing pending; those of the other commands are raised.
            results = await pipe.execute(raise_on_error=False)
        if node:
            results[4:4] = [
                await redis.info("memory", **node),
                await redis.info("replication", **node),
            ]
        counts, depth, depth_high, waiting, memory, replication, *pending = results
        for result in (counts, depth, depth_high, waiting, memory, replication):
            if isinstance(result, Exception):
                raise result
        return StoreSample(
            finished=sum(int(float(c)) for c in counts if c is not None),
            depth=int(depth),
            depth_high=int(depth_high),
            in_hand=sum(int(p["pending"]) if isinstance(p, dict) else 0 for p in pending),
            waiting=max(0, int(waiting or 0)),
            memory=dict(memory),
            replication=dict(replication),
        )

    async def topology(self) -> dict[str, Any]:
        """The deployment as a probe reports it (core/infra/topology.py)."""
        return await report(self._redis, self._keys.jobs)
