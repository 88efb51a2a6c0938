"""Waiting on jobs: their terminal event, their start on a worker."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from core.queue.job import TERMINAL_STATES
from core.queue.store import Queue

TERMINAL = {state.value for state in TERMINAL_STATES}


async def wait_terminal(queue: Queue, job_id: str, timeout: float = 20.0) -> list[dict[str, Any]]:
    """All events of a job once its terminal event is there."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        events = [
            e for _, e in await queue.events.after(queue.keys.job_events(job_id), None, 10_000)
        ]
        if events and events[-1]["type"] in TERMINAL:
            return events
        await asyncio.sleep(0.05)
    raise TimeoutError(f"job {job_id} did not finish")


LONG_TEXT = " ".join(
    f"Sentence number {i} keeps this worker busy for a little while." for i in range(80)
)


async def wait_running(
    queue: Queue, job_id: str, timeout: float = 20.0, not_owner: str | None = None
) -> str:
    """The owner of a job once it runs (on a worker other than `not_owner`)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        [(state, owner)] = await queue.held([job_id])
        if state == "running" and owner and owner != not_owner:
            return owner
        await asyncio.sleep(0.01)
    raise TimeoutError(f"job {job_id} never ran")
