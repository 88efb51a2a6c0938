"""Scripts that many requests of one event loop run, written to one Redis server together: what
callers ask in one turn of the loop goes out in one write on one pooled connection, and the
replies are read back in order.

Written by hand for the submit path: redis-py's command path (argument encoding, the pool's
checks, a timeout and a retry wrapper per command) cost a quarter of the web tier's CPU per
submission (py-spy under `python -m bench.submit`), for commands that need none of it. Anything
unusual takes redis-py's own path: a script Redis has not cached (it loads it), a connection that
broke (it retries, as it would have retried the command).
"""

from __future__ import annotations

import asyncio
from typing import Any

import hiredis
from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.exceptions import ConnectionError, NoScriptError, ResponseError, TimeoutError

# A reply that sends its caller down redis-py's path (a script may return nil: not None).
_AGAIN = object()


class Pipelined:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self._waiting: list[tuple[bytes, asyncio.Future[Any]]] = []
        self._sending: set[asyncio.Task[None]] = set()

    async def run(self, script: AsyncScript, keys: list[str], args: list[Any]) -> Any:
        """`script(keys=keys, args=args)`, sent with the other callers' of this turn."""
        packed = hiredis.pack_command(("EVALSHA", script.sha, len(keys), *keys, *args))
        loop = asyncio.get_running_loop()
        reply: asyncio.Future[Any] = loop.create_future()
        if not self._waiting:
            loop.call_soon(self._send_waiting)
        self._waiting.append((packed, reply))
        result = await reply
        if result is _AGAIN:
            return await script(keys=keys, args=args)
        return result

    def _send_waiting(self) -> None:
        batch, self._waiting = self._waiting, []
        task = asyncio.create_task(self._send(batch))
        self._sending.add(task)  # held until done (the loop keeps only weak references)
        task.add_done_callback(self._sending.discard)

    async def _send(self, batch: list[tuple[bytes, asyncio.Future[Any]]]) -> None:
        pool = self.redis.connection_pool
        try:
            connection = await pool.get_connection()  # type: ignore[no-untyped-call, unused-ignore]
        except BaseException as exc:
            for _, reply in batch:
                _settle(reply, exc)
            raise
        answered = 0
        try:
            await connection.send_packed_command([packed for packed, _ in batch], False)
            for _, reply in batch:
                try:
                    _settle(reply, await connection.read_response())
                except NoScriptError:
                    _settle(reply, _AGAIN)  # loaded by redis-py's path
                except ResponseError as exc:  # the script's own error: its caller's
                    _settle(reply, exc)
                answered += 1
        except (ConnectionError, TimeoutError, OSError, asyncio.CancelledError) as exc:
            # Retried as redis-py retries a command (cancelled: the loop is closing, and its
            # callers try on their own).
            await connection.disconnect()
            for _, reply in batch[answered:]:
                _settle(reply, _AGAIN)
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            await pool.release(connection)


def _settle(reply: asyncio.Future[Any], outcome: Any) -> None:
    """Hand `outcome` (a reply, or an exception to raise) to a caller still waiting for it."""
    if reply.done():
        return  # its caller went away (its request was cancelled)
    if isinstance(outcome, BaseException):
        reply.set_exception(outcome)
    else:
        reply.set_result(outcome)
