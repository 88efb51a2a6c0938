"""Ctrl-C in the client commands: the work in hand is stopped and cleaned up, and the process
ends within INTERRUPT_GRACE_S whatever still runs; a second Ctrl-C ends it at once (exit 130)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from cli.errors import INTERRUPTED, CliError

# After Ctrl-C: how long submissions in flight and the cancelling of jobs may take, and how long
# the whole exit may take before the process ends regardless (a library that swallowed the
# cancellation, a server that stopped answering).
CANCEL_TIMEOUT_S = 3.0
INTERRUPT_GRACE_S = 8.0


async def until_interrupted(
    work: Coroutine[Any, Any, int], on_interrupt: Callable[[], Awaitable[None]]
) -> int:
    """`work`'s result; at Ctrl-C, `work` is stopped, `on_interrupt` runs, and CliError(130).

    The first Ctrl-C is not only a cancellation of `work` (a library may swallow one, and then
    nothing would end): it also starts a timer that ends the process INTERRUPT_GRACE_S later,
    whatever is still running. A second Ctrl-C ends it at once.
    """
    loop = asyncio.get_running_loop()
    interrupted = asyncio.Event()

    def on_sigint() -> None:
        if interrupted.is_set():
            _exit_now("interrupted again")
        interrupted.set()
        print(
            "\nchattts-online: stopping (Ctrl-C again to quit at once)", file=sys.stderr, flush=True
        )
        deadline = threading.Timer(INTERRUPT_GRACE_S, _exit_now, ("still busy; exiting now",))
        deadline.daemon = True  # never what keeps the process alive
        deadline.start()

    task = asyncio.ensure_future(work)
    waiter = asyncio.ensure_future(interrupted.wait())
    loop.add_signal_handler(signal.SIGINT, on_sigint)
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if not interrupted.is_set():
            return task.result()
        task.cancel()
        await asyncio.wait({task}, timeout=CANCEL_TIMEOUT_S)
        if task.done() and not task.cancelled():
            task.exception()  # retrieved: what it failed with after Ctrl-C no longer matters
        await on_interrupt()
        raise CliError("interrupted", INTERRUPTED)
    finally:
        waiter.cancel()
        loop.remove_signal_handler(signal.SIGINT)


def _exit_now(why: str) -> None:
    """End the process at once (no cleanup can hang it): the last resort after Ctrl-C."""
    with contextlib.suppress(OSError):
        os.write(sys.stderr.fileno(), f"chattts-online: {why}\n".encode())
    os._exit(INTERRUPTED)
