"""Queue-wide metrics read from Redis at scrape time: backlog, lag, pending, DLQ, outcomes, cache.

Every web process reports the same cluster-wide values (the Lua scripts of every worker count
into the queue's `stats` hash); a dashboard takes `max` over the web replicas, not `sum`.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from core.queue.job import TERMINAL_NAMES
from core.queue.readings import QueueReading
from core.queue.store import Queue
from web.monitors.backlog import BacklogAlert

# Terminal states a job ends in, as counted by the Lua scripts in the stats hash.
OUTCOMES = TERMINAL_NAMES
# The usage tallies (core/queue/console.py) as metrics: (measure, metric name, what it counts).
USAGE = (
    ("jobs", "jobs", "Jobs ended"),
    ("ok", "succeeded_jobs", "Jobs succeeded"),
    ("chars", "characters", "Characters of the jobs ended"),
    ("audio_s", "audio_seconds", "Seconds of audio made"),
)


async def read_queue(queue: Queue) -> QueueReading:
    return await queue.readings.queue()


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
            r.backlog,
        )
        waiting = GaugeMetricFamily(
            "chattts_queue_waiting_jobs",
            "Jobs in the fair scheduler's waiting room, by lane",
            labels=["lane"],
        )
        clients = GaugeMetricFamily(
            "chattts_queue_waiting_clients",
            "Clients with jobs in the fair scheduler's waiting room, by lane",
            labels=["lane"],
        )
        oldest = GaugeMetricFamily(
            "chattts_queue_waiting_oldest_age_seconds",
            "Age of the oldest job in the fair scheduler's waiting room (since it joined), by lane",
            labels=["lane"],
        )
        yield GaugeMetricFamily(
            "chattts_queue_paused", "1 while operators pause the queue's intake", int(r.paused)
        )
        for measure, name, what in USAGE:
            usage = GaugeMetricFamily(
                f"chattts_usage_today_{name}",
                f"{what} today (UTC), per API key's client; every other client in 'others'",
                labels=["client"],
            )
            for client, measures in sorted(r.usage_today.items()):
                usage.add_metric([client], measures.get(measure, 0.0))
            yield usage
        for lane, count in r.waiting.items():
            waiting.add_metric([lane], count)
            clients.add_metric([lane], r.waiting_clients.get(lane, 0))
            oldest.add_metric([lane], r.oldest_waiting_age_s.get(lane, 0.0))
        yield waiting
        yield clients
        yield oldest
        streams = r.streams_fleet
        for name, doc, value in (
            (
                "chattts_streams_capacity",
                "Streams the live workers carry at once, each ahead of its listener",
                streams.capacity,
            ),
            ("chattts_streams_playing", "Streamed jobs in the workers' hands", streams.playing),
            (
                "chattts_streams_waiting",
                "Streamed jobs waiting for a worker with room for them (scale out on this)",
                streams.waiting,
            ),
            (
                "chattts_workers_below_realtime",
                "Live workers that cannot carry even one stream in real time",
                streams.below_realtime,
            ),
        ):
            yield GaugeMetricFamily(name, doc, value)
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
