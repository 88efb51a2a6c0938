"""Requests that wait on a job while their client may leave: the wait is cancelled when it does."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

from aiohttp import web

from web.following import Closing, closing_error, job_error, wait_end

T = TypeVar("T")

GONE_POLL_S = 0.25  # how often a waiting request checks that its client is still there


async def gone(request: web.Request) -> None:
    """Returns once the client has closed its connection."""
    while True:
        transport = request.transport
        if transport is None or transport.is_closing():
            return
        await asyncio.sleep(GONE_POLL_S)


async def unless_gone(request: web.Request, work: Awaitable[T]) -> tuple[bool, T | None]:
    """Run `work` until it ends or the client goes away (then it is cancelled): (done, result)."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.create_task(gone(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in (task, watcher):
            t.cancel()
        await asyncio.gather(task, watcher, return_exceptions=True)
    if task.cancelled():
        return False, None
    return True, task.result()


async def succeeded(request: web.Request, job_id: str, cursor: str | None) -> dict[str, Any] | None:
    """The job's snapshot once it succeeded; None when the client left first. Its failure, or
    the server closing, is the ApiError to answer."""
    try:
        done, event = await unless_gone(request, wait_end(request.app, job_id, cursor))
    except Closing:
        raise closing_error(job_id) from None
    if not done or event is None:  # nobody is listening any more
        return None
    if event.get("type") != "succeeded":
        raise job_error(event)
    finished: dict[str, Any] = event.get("job") or {}
    return finished
