"""How many streams this worker carries in real time, and how many more it may take now.

The ChatTTS runtime measures its own capacity step by step (its `stream_capacity`); for an engine
that synthesizes whole batches (eSpeak NG), the streams share its speed: the seconds of speech it
made per second it was busy. The runtime takes streams beyond its capacity too, into free rows:
it holds their first audio until the rest can follow without a gap, so that a device below real
time batches streams like any other work (and says so, once, in its log and metrics).
"""

from __future__ import annotations

import logging
import math
from typing import Any

from core.infra.settings import Settings
from workers.chunks import ChunkPublisher
from workers.engines import Engine
from workers.metrics import WorkerMetrics

log = logging.getLogger("chattts_online.worker")


class StreamRoom:
    def __init__(
        self,
        name: str,
        settings: Settings,
        engine: Engine,
        chunks: ChunkPublisher,
        metrics: WorkerMetrics,
        hand: int,
    ) -> None:
        """`hand`: the most jobs the worker holds (no more streams than that, whatever the
        engine's speed)."""
        self.name, self.settings, self.engine = name, settings, engine
        self.chunks, self.metrics = chunks, metrics
        self.hand = hand
        self._warned = False

    def _measures(self) -> tuple[int | None, float | None]:
        """From one look at the engine: the capacity it measures itself (None: it does not),
        and one stream's speed alone, x real time (None: not measured yet)."""
        stats: dict[str, Any] = self.engine.stats()
        if "realtime_speed" in stats:
            speed = stats["realtime_speed"]
            measured = float(speed) if speed is not None else None
            # Not measured yet (nothing ran since the warm-up): one stream, the first measure.
            own = int(stats.get("stream_capacity") or 0) if measured is not None else 1
            return own, measured
        tally = self.metrics.tally  # no measure before a segment has come back
        measured = tally.busy_s > 0 and tally.made_s > 0
        return None, tally.made_s / tally.busy_s if measured else None

    def _capacity(self, own: int | None, speed: float | None) -> int:
        """Streams carried at once, each `CHATTTS_STREAM_HEADROOM` times faster than real time."""
        if self.settings.scheduling.stream_capacity > 0:
            return self.settings.scheduling.stream_capacity
        if own is not None:
            capacity = own
        else:
            headroom = max(self.settings.scheduling.stream_headroom, 1.0)
            capacity = self.hand if speed is None else math.floor(speed / headroom)
        capacity = min(capacity, self.hand)
        self._report(capacity, speed)
        return capacity

    def room(self) -> int:
        """Streams the worker may take now: up to its capacity (one at a time when it has
        none), and up to the engine's rows when the engine holds streams until they can play
        without a gap (ours does); any number with CHATTTS_STREAM_ADMISSION=off."""
        if self.settings.scheduling.stream_admission != "capacity":
            return self.hand
        own, speed = self._measures()
        capacity = self._capacity(own, speed)
        if own is not None:
            capacity = max(capacity, min(self.hand, int(self.engine.max_batch)))
        return max(0, max(1, capacity) - self.chunks.playing)

    def reading(self) -> dict[str, Any]:
        """For the heartbeat (and so /readyz and /metrics)."""
        own, speed = self._measures()  # one look at the engine for both
        capacity, playing = self._capacity(own, speed), self.chunks.playing
        self.metrics.streams_playing.set(playing)
        if speed is not None:
            self.metrics.stream_speed.set(speed)
        return {
            "capacity": capacity,
            "playing": playing,
            "speed": round(speed, 3) if speed is not None else None,
            "admission": self.settings.scheduling.stream_admission,
        }

    def _report(self, capacity: int, speed: float | None) -> None:
        if capacity == 0 and not self._warned:
            if speed is None:
                return
            self._warned = True
            log.warning(
                "worker %s: this device makes %.3gx real time for one stream, below the "
                "%.3gx of CHATTTS_STREAM_HEADROOM: streams are batched like other work, and "
                "each one's first audio waits until the rest can follow without a gap; add a "
                "faster device for streams that start at once",
                self.name,
                speed,
                self.settings.scheduling.stream_headroom,
            )
        elif capacity > 0:
            self._warned = False
        self.metrics.stream_capacity.set(capacity)
