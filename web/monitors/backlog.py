"""The backlog alert: waiting jobs above `CHATTTS_BACKLOG_ALERT` -> a warning, a metric, `/readyz`.

Fed by the throughput sampler (once a second per web process, no Redis work of its own). It
clears below 90% of the threshold, so a backlog hovering at the line logs once, not every second.
"""

from __future__ import annotations

import logging

log = logging.getLogger("chattts_online.web.backlog")

# Hysteresis: the alert clears only below this fraction of the threshold.
CLEAR_FRACTION = 0.9


class BacklogAlert:
    def __init__(self, threshold: int) -> None:
        self.threshold = threshold
        self.waiting: int | None = None  # jobs accepted and not yet started, at the last sample
        self.active = False

    def update(self, waiting: int) -> None:
        self.waiting = waiting
        if self.threshold <= 0:
            return  # 0 turns the alert off
        if not self.active and waiting > self.threshold:
            self.active = True
            log.warning(
                "backlog alert: %d jobs waiting, above CHATTTS_BACKLOG_ALERT=%d: add workers",
                waiting,
                self.threshold,
            )
        elif self.active and waiting < CLEAR_FRACTION * self.threshold:
            self.active = False
            log.info("backlog alert cleared: %d jobs waiting", waiting)

    def detail(self) -> dict[str, int | bool | None]:
        """The readiness detail (the alert never makes the process unready)."""
        return {"alert": self.active, "waiting": self.waiting, "threshold": self.threshold}
