"""What one worker process records, once per event: its Prometheus metrics (its own registry,
served on its own port, `CHATTTS_WORKER_METRICS_PORT`, by a tiny aiohttp server on the worker's
asyncio loop) and the tally its heartbeat publishes (stats.py), from the same calls."""

from __future__ import annotations

import logging
import time
from collections.abc import Sized
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    generate_latest,
)

from workers.checks.verdict import Verdict
from workers.engines import Engine, Segment
from workers.jobs import ActiveJob

log = logging.getLogger("chattts_online.worker")

# Every way a job leaves this worker's hands; declared up front so each series exists at 0.
# "lost": reclaimed by another worker (lease lost, or its completion fenced); "released": given
# back to the queue (a transient engine error, or shutdown past the grace period).
OUTCOMES = (
    "succeeded",
    "cache_hit",
    "failed",
    "cancelled",
    "dead",
    "released",
    "yielded",
    "lost",
)
# Waits and latencies: milliseconds with an idle queue and espeak, minutes with a GPU backlog.
LATENCY_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1, 2.5, 5, 10, 30, 60, 120, 300, 600,
)  # fmt: skip
# Real-time factor: espeak runs at ~0.001-0.05, ChatTTS at ~0.05-5 (GPU to CPU).
RTF_BUCKETS = (
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10,
)  # fmt: skip
# Segments or jobs per busy period of the engine.
BATCH_BUCKETS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64)


@dataclass
class Tally:
    """The counts a worker's heartbeat carries (for probes and `/v1/voices`)."""

    jobs_succeeded: int = 0
    jobs_failed: int = 0
    jobs_fenced: int = 0
    batches: int = 0
    segments: int = 0
    audio_seconds: float = 0.0
    busy_s: float = 0.0
    # Audio the engine made in that time, every segment (a job's audio_seconds counts only jobs
    # that succeeded: cancelled, failed and unfinished ones spent engine time too).
    made_s: float = 0.0
    largest_batch: int = 0  # most segments in one engine call
    batch_jobs_max: int = 0  # most distinct jobs in one engine call (cross-request batching)
    # Segments heard, by voice: {"passed", "failed", "unheard", "remade": n, "reasons": {r: n}}.
    checks: dict[str, dict[str, Any]] = field(default_factory=dict)


class WorkerMetrics:
    """The worker's one recorder: every method is one event, counted in the metrics and in the
    heartbeat's tally alike."""

    def __init__(self, in_hand: Sized) -> None:
        self.tally = Tally()
        self.registry = r = CollectorRegistry()
        self.port: int | None = None  # bound port of the /metrics server; None: not serving
        self._runner: web.AppRunner | None = None
        self.jobs = Counter(
            "chattts_worker_jobs", "Jobs that left this worker, by outcome", ["outcome"], registry=r
        )
        for outcome in OUTCOMES:
            self.jobs.labels(outcome)
        self.queue_wait = Histogram(
            "chattts_worker_queue_wait_seconds",
            "Job queued (submitted, or given back) to started by this worker",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.synthesis = Histogram(
            "chattts_worker_synthesis_seconds",
            "Engine time per succeeded job (its share of every batch it was in)",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.rtf = Histogram(
            "chattts_worker_real_time_factor",
            "Synthesis seconds / audio seconds per succeeded job",
            buckets=RTF_BUCKETS,
            registry=r,
        )
        self.first_segment = Histogram(
            "chattts_worker_time_to_first_segment_seconds",
            "Job enqueued to its first segment's audio stored (synthesized jobs)",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.batch_segments = Histogram(
            "chattts_worker_batch_segments",
            "Segments per busy period (the engine never idle between them)",
            buckets=BATCH_BUCKETS,
            registry=r,
        )
        self.batch_jobs = Histogram(
            "chattts_worker_batch_jobs",
            "Distinct jobs per busy period (cross-request batching)",
            buckets=BATCH_BUCKETS,
            registry=r,
        )
        self.cache_hits = Counter(
            "chattts_worker_cache_hits", "Jobs answered from the result cache", registry=r
        )
        self.cache_misses = Counter(
            "chattts_worker_cache_misses", "Cacheable jobs not in the result cache", registry=r
        )
        self.redis_errors = Counter(
            "chattts_worker_redis_errors", "Redis errors caught and survived", registry=r
        )
        self.lease_failures = Counter(
            "chattts_worker_lease_renewal_failures", "Lease renewal rounds that failed", registry=r
        )
        self.fenced = Counter(
            "chattts_worker_stale_completions_refused",
            "Completions refused because another worker had reclaimed the job",
            registry=r,
        )
        self.audio_seconds = Counter(
            "chattts_worker_audio_seconds", "Seconds of audio synthesized", registry=r
        )
        self.in_hand = Gauge(
            "chattts_worker_jobs_in_hand", "Jobs in this worker's hands", registry=r
        )
        self.in_hand.set_function(lambda: len(in_hand))
        self.ready = Gauge(
            "chattts_worker_ready",
            "1 once the engine is loaded and warm, until stopping",
            registry=r,
        )
        self.engine_load = Gauge(
            "chattts_worker_engine_load_seconds",
            "Seconds to load and warm up the engine",
            registry=r,
        )
        self.stream_capacity = Gauge(
            "chattts_worker_stream_capacity",
            "Streams this worker carries at once, each ahead of its listener (as measured; "
            "0: not even one in real time)",
            registry=r,
        )
        self.streams_playing = Gauge(
            "chattts_worker_streams_playing", "Streamed jobs in this worker's hands", registry=r
        )
        self.stream_speed = Gauge(
            "chattts_worker_stream_speed",
            "One stream's synthesis speed alone, x real time (below 1: a stream's first audio "
            "waits until the rest can follow without a gap)",
            registry=r,
        )
        self.stream_gaps = Counter(
            "chattts_worker_stream_gaps_seconds_total",
            "Seconds listeners who had started hearing a stream waited for its next chunk "
            "(a listener playing in real time from the first chunk, pausing when it runs dry)",
            registry=r,
        )
        self.checks = Counter(
            "chattts_worker_segment_checks",
            "Segments heard before they counted, by verdict (passed, failed: kept the best "
            "attempt, unheard: nothing could check its words)",
            ["engine", "voice", "verdict"],
            registry=r,
        )
        self.check_reasons = Counter(
            "chattts_worker_segment_check_failures",
            "Failed attempts of segments, by reason (not_finite, clipped, ran_to_budget, "
            "too_short, too_long, silence, loop, words)",
            ["engine", "voice", "reason"],
            registry=r,
        )
        self.remakes = Counter(
            "chattts_worker_segment_remakes",
            "Segments made again because their attempts so far failed",
            ["engine", "voice"],
            registry=r,
        )
        self.engine_name = ""
        self.info = Info("chattts_worker", "The worker's name, engine and model", registry=r)

    # -- lifecycle --------------------------------------------------------------------------

    def loaded(self, name: str, engine: Engine, ready_s: float) -> None:
        self.info.info({"name": name, "engine": engine.name, "model_version": engine.model_version})
        self.engine_name = engine.name
        self.engine_load.set(ready_s)
        self.ready.set(1)

    async def serve(self, host: str, port: int) -> None:
        """Serve GET /metrics (and /healthz) on `host`:`port` (CHATTTS_HOST, as the web tier: a
        laptop keeps it local, containers set 0.0.0.0); port 0: off; a taken port: warn."""
        if port <= 0:
            return
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        try:
            await web.TCPSite(runner, host, port).start()
        except (OSError, OverflowError) as exc:  # taken, not allowed, or not a port number
            log.warning(
                "cannot serve worker metrics on port %d (CHATTTS_WORKER_METRICS_PORT): %s; "
                "going on without /metrics",
                port,
                exc,
            )
            await runner.cleanup()
            return
        self._runner = runner
        self.port = port
        log.info("worker metrics on http://%s:%d/metrics", host, port)

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner, self.port = None, None

    async def _metrics(self, _request: web.Request) -> web.Response:
        return web.Response(
            body=generate_latest(self.registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    async def _healthz(self, _request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    # -- jobs -------------------------------------------------------------------------------

    def start_refused(self, verdict: str) -> None:
        """A delivered entry that did not start: past max deliveries ("dead:<n>") or skipped."""
        if verdict.startswith("dead"):
            self.jobs.labels("dead").inc()

    def started(self, queued_at: float) -> None:
        self.queue_wait.observe(max(0.0, time.time() - queued_at))

    def cache_lookup(self, hit: bool) -> None:
        (self.cache_hits if hit else self.cache_misses).inc()

    def outcome(self, outcome: str) -> None:
        """A job left this worker's hands (not in success: see `succeeded`)."""
        self.jobs.labels(outcome).inc()
        if outcome == "failed":
            self.tally.jobs_failed += 1

    def observe_rows(self, batch: list[tuple[ActiveJob, Segment]]) -> None:
        """The size of a group of segments the engine served together."""
        jobs = len({job.job_id for job, _ in batch})
        self.batch_segments.observe(len(batch))
        self.batch_jobs.observe(jobs)
        t = self.tally
        t.batches += 1
        t.segments += len(batch)
        t.largest_batch = max(t.largest_batch, len(batch))
        t.batch_jobs_max = max(t.batch_jobs_max, jobs)

    def busy(self, elapsed_s: float) -> None:
        """Engine time spent on segments, as it passes."""
        self.tally.busy_s += elapsed_s

    def made(self, audio_s: float) -> None:
        """A segment's audio came out of the engine (kept or not: its busy time was spent)."""
        self.tally.made_s += audio_s

    def segment_stored(self, job: ActiveJob, index: int) -> None:
        if index == 0:
            self.first_segment.observe(max(0.0, time.time() - job.started.queued_at))

    def attempt_heard(self, job: ActiveJob, verdict: Verdict) -> None:
        """An attempt of a segment was heard: a failed one's reasons are counted."""
        counts = self._counts(job)
        for reason in verdict.reasons:
            self.check_reasons.labels(self.engine_name, job.started.request.voice, reason).inc()
            counts["reasons"][reason] = counts["reasons"].get(reason, 0) + 1

    def segment_remade(self, job: ActiveJob) -> None:
        """A segment's attempts so far failed: it is made again."""
        self.remakes.labels(self.engine_name, job.started.request.voice).inc()
        self._counts(job)["remade"] += 1

    def segment_heard(self, job: ActiveJob, verdict: Verdict) -> None:
        """A segment kept its best attempt, with this verdict."""
        self.checks.labels(self.engine_name, job.started.request.voice, verdict.state).inc()
        self._counts(job)[verdict.state] += 1

    def _counts(self, job: ActiveJob) -> dict[str, Any]:
        return self.tally.checks.setdefault(
            job.started.request.voice,
            {"passed": 0, "failed": 0, "unheard": 0, "remade": 0, "reasons": {}},
        )

    def succeeded(self, job: ActiveJob, duration_s: float) -> None:
        if len(job.segments) == 1:  # its only segment is stored with the final file, just now
            self.segment_stored(job, 0)
        self.jobs.labels("succeeded").inc()
        self.synthesis.observe(job.engine_s)
        if duration_s > 0:
            self.rtf.observe(job.engine_s / duration_s)
        self.audio_seconds.inc(duration_s)
        self.tally.jobs_succeeded += 1
        self.tally.audio_seconds += duration_s

    def completion_refused(self) -> None:
        self.fenced.inc()
        self.jobs.labels("lost").inc()
        self.tally.jobs_fenced += 1

    def redis_error(self) -> None:
        self.redis_errors.inc()

    def lease_renewal_failed(self) -> None:
        self.lease_failures.inc()
        self.redis_errors.inc()
