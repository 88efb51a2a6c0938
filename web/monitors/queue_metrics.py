"""Queue-wide metrics read from Redis at scrape time: backlog, lag, pending, DLQ, outcomes, cache.

Every web process reports the same cluster-wide values (the Lua scripts of every worker count
into the queue's `stats` hash); a dashboard takes `max` over the web replicas, not `sum`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from core.queue.job import TERMINAL_NAMES
from core.queue.keys import CONSUMER_GROUP
from core.queue.store import Queue
from web.monitors.backlog import BacklogAlert
from web.monitors.fleet import live_heartbeats

# Terminal states a job ends in, as counted by the Lua scripts in the stats hash.
OUTCOMES = TERMINAL_NAMES


def _stream_label(queue: Queue, stream: str) -> str:
    return "jobs_high" if stream == queue.keys.jobs_high else "jobs"


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
class QueueReading:
    streams: dict[str, StreamReading] = field(default_factory=dict)
    dead_letters: int = 0
    stats: dict[str, float] = field(default_factory=dict)
    workers_alive: int = 0


async def read_stream(queue: Queue, stream: str, now: float) -> StreamReading:
    redis = queue.redis
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


async def read_queue(queue: Queue) -> QueueReading:
    now = time.time()
    reading = QueueReading()
    for stream in queue.keys.streams:
        reading.streams[_stream_label(queue, stream)] = await read_stream(queue, stream, now)
    reading.dead_letters = int(await queue.redis.xlen(queue.keys.dlq))
    reading.stats = await queue.stats()
    reading.workers_alive = len(await live_heartbeats(queue))
    return reading


class QueueCollector(Collector):
    """Yields the last reading (refreshed by the `/metrics` view before it renders)."""

    def __init__(self, alert: BacklogAlert | None = None) -> None:
        self.reading = QueueReading()
        self.alert = alert

    def collect(self) -> Iterator[Metric]:
        r = self.reading
        yield GaugeMetricFamily(
            "chattts_queue_backlog_jobs",
            "Jobs accepted and not finished (waiting or running)",
            sum(s.length for s in r.streams.values()),
        )
        per_stream = [
            ("chattts_queue_lag_entries", "Entries no worker has read yet", "lag"),
            ("chattts_queue_pending_entries", "Entries read by a worker, not finished", "pending"),
            (
                "chattts_queue_oldest_pending_age_seconds",
                "Age (since submission) of the oldest job in a worker's hands",
                "oldest_pending_age_s",
            ),
            (
                "chattts_queue_oldest_waiting_age_seconds",
                "Age of the oldest job no worker has read yet",
                "oldest_waiting_age_s",
            ),
        ]
        for name, doc, attr in per_stream:
            family = GaugeMetricFamily(name, doc, labels=["stream"])
            for label, stream in r.streams.items():
                family.add_metric([label], getattr(stream, attr))
            yield family
        yield GaugeMetricFamily(
            "chattts_dead_letter_entries", "Jobs in the dead-letter stream", r.dead_letters
        )
        outcomes = CounterMetricFamily(
            "chattts_jobs", "Jobs that ended, by outcome (all workers)", labels=["outcome"]
        )
        for outcome in OUTCOMES:
            outcomes.add_metric([outcome], r.stats.get(outcome, 0.0))
        yield outcomes
        cluster_counters = [
            ("chattts_queue_submitted_jobs", "Jobs accepted (all web processes)", "submitted"),
            ("chattts_queue_reclaimed_jobs", "Jobs taken over after a lease ran out", "reclaimed"),
            (
                "chattts_queue_stale_completions_refused",
                "Stale results refused by the attempt fence (all workers)",
                "fenced",
            ),
            ("chattts_queue_audio_seconds", "Audio produced (all workers)", "audio_seconds"),
        ]
        for name, doc, key in cluster_counters:
            yield CounterMetricFamily(name, doc, r.stats.get(key, 0.0))
        callbacks = CounterMetricFamily(
            "chattts_queue_callbacks",
            "Callback attempts by outcome: delivered, retry, failed (all web processes)",
            labels=["outcome"],
        )
        for outcome in ("delivered", "retry", "failed"):
            callbacks.add_metric([outcome], r.stats.get(f"callbacks_{outcome}", 0.0))
        yield callbacks
        yield GaugeMetricFamily(
            "chattts_workers_alive", "Workers whose heartbeat is fresh", r.workers_alive
        )
        yield from self._cache()
        yield from self._alert()

    def _cache(self) -> Iterator[Metric]:
        hits = self.reading.stats.get("cache_hits", 0.0)
        misses = self.reading.stats.get("cache_misses", 0.0)
        yield CounterMetricFamily(
            "chattts_cache_hits", "Jobs answered from the result cache (all workers)", hits
        )
        yield CounterMetricFamily(
            "chattts_cache_misses", "Cacheable jobs not in the result cache (all workers)", misses
        )
        yield GaugeMetricFamily(
            "chattts_cache_hit_ratio",
            "Hits / (hits + misses) of the result cache since the queue was created",
            hits / (hits + misses) if hits + misses else 0.0,
        )

    def _alert(self) -> Iterator[Metric]:
        if self.alert is None:
            return
        yield GaugeMetricFamily(
            "chattts_backlog_alert",
            "1 while waiting jobs exceed CHATTTS_BACKLOG_ALERT (sampled every second)",
            1.0 if self.alert.active else 0.0,
        )
        yield GaugeMetricFamily(
            "chattts_backlog_alert_threshold_jobs",
            "CHATTTS_BACKLOG_ALERT (0: off)",
            self.alert.threshold,
        )
