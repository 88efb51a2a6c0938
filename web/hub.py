"""One pub/sub connection per web process, fanning doorbells out to local SSE/WS subscribers.

A doorbell only says "there is news on stream S"; events are always read from the Redis event
streams after the subscriber's cursor (`follow`). So a lost doorbell (pub/sub reconnect, a
notification between two reads) costs at most one safety-poll interval, never an event.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Callable
from typing import Any

from aiohttp import WSCloseCode, web
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisError, ResponseError

from core.infra.redis_client import REDIS_DOWN, RedisClient, connect
from core.infra.settings import Settings
from core.queue.events import Event
from core.queue.job import TERMINAL_NAMES
from core.queue.keys import Keys
from core.queue.store import Queue

log = logging.getLogger("chattts_online.web.hub")

# Safety poll: a subscriber re-reads its stream this often even without a doorbell.
POLL_S = 1.5
# Events read per stream and read while replaying.
READ_BATCH = 100
# Streams per XREAD of the read batcher (one command, one round trip for all of them).
XREAD_STREAMS = 256
BACKOFF_START_S, BACKOFF_MAX_S = 0.1, 2.0
STOP_TIMEOUT_S = 3.0
TERMINAL_TYPES = frozenset(TERMINAL_NAMES)


class Subscriber:
    """A local interest in one event stream. The hub rings it; it never queues payloads."""

    __slots__ = ("_rung", "stream")

    def __init__(self, stream: str) -> None:
        self.stream = stream
        self._rung = asyncio.Event()

    def ring(self) -> None:
        self._rung.set()

    async def wait(self, seconds: float) -> bool:
        """Wait for a doorbell (True) or `seconds` (False). Clears the bell before returning."""
        try:
            async with asyncio.timeout(seconds):
                await self._rung.wait()
        except TimeoutError:
            return False
        self._rung.clear()
        return True


def _retrieve(future: asyncio.Future[list[Event]]) -> None:
    if not future.cancelled():
        future.exception()  # a read whose followers all left: its error is nobody's news


class ReadBatcher:
    """The followers' stream reads of one event-loop iteration, sent as one XREAD of all their
    streams: a doorbell for thousands of streams (one per open SSE connection) costs a few round
    trips, not one each, and never a burst of new Redis connections. Followers of the same
    stream at the same cursor share one read."""

    def __init__(self) -> None:
        self._pending: dict[tuple[Queue, int], dict[tuple[str, str], asyncio.Future[list[Event]]]]
        self._pending = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def read(self, queue: Queue, stream: str, after: str | None, count: int) -> list[Event]:
        """As `queue.events.after(stream, after, count)`."""
        cursor = after if after not in (None, "", "0") else "0-0"
        assert cursor is not None
        loop = asyncio.get_running_loop()
        if not self._pending:
            loop.call_soon(self._flush)
        reads = self._pending.setdefault((queue, count), {})
        future = reads.get((stream, cursor))
        if future is None:
            future = reads[(stream, cursor)] = loop.create_future()
            future.add_done_callback(_retrieve)
        # Shielded: a follower that leaves must not cancel the read of the others sharing it.
        return await asyncio.shield(future)

    def _flush(self) -> None:
        pending, self._pending = self._pending, {}
        for (queue, count), reads in pending.items():
            # One XREAD names each stream once: a stream read at two cursors goes in two.
            batches: list[dict[str, tuple[str, asyncio.Future[list[Event]]]]] = []
            for (stream, cursor), future in reads.items():
                batch = next(
                    (b for b in batches if stream not in b and len(b) < XREAD_STREAMS), None
                )
                if batch is None:
                    batch = {}
                    batches.append(batch)
                batch[stream] = (cursor, future)
            for batch in batches:
                task = asyncio.create_task(self._xread(queue, count, batch))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _xread(
        queue: Queue, count: int, batch: dict[str, tuple[str, asyncio.Future[list[Event]]]]
    ) -> None:
        """Resolve every future of `batch`, whatever happens: a follower never waits forever."""
        try:
            streams = {stream: cursor for stream, (cursor, _) in batch.items()}
            try:
                found = await queue.events.after_each(streams, count)
            except ResponseError:
                if len(batch) == 1:
                    raise
                # A command error names no stream (WRONGTYPE, ...): each stream is read alone,
                # so the error stays with the stream that caused it.
                await asyncio.gather(
                    *(_read_alone(queue, count, s, c, f) for s, (c, f) in batch.items())
                )
                return
            for stream, (_, future) in batch.items():
                if future.done():
                    continue
                result = found.get(stream, [])
                if isinstance(result, Exception):  # an entry that is not one of our events
                    future.set_exception(result)
                else:
                    future.set_result(result)
        except Exception as exc:
            for _, future in batch.values():
                if not future.done():
                    future.set_exception(exc)
        finally:  # cancelled (shutdown): the followers end too
            for _, future in batch.values():
                if not future.done():
                    future.cancel()


async def _read_alone(
    queue: Queue, count: int, stream: str, cursor: str, future: asyncio.Future[list[Event]]
) -> None:
    try:
        events = await queue.events.after(stream, cursor, count)
    except Exception as exc:
        if not future.done():
            future.set_exception(exc)
    else:
        if not future.done():
            future.set_result(events)


class EventHub:
    """PSUBSCRIBE to every doorbell of the queue on a dedicated connection; reconnect forever."""

    def __init__(
        self,
        settings: Settings,
        keys: Keys,
        on_reconnect: Callable[[], None] | None = None,
    ) -> None:
        self.settings = settings
        self.keys = keys
        self._on_reconnect = on_reconnect
        self._subs: dict[str, set[Subscriber]] = {}
        self._task: asyncio.Task[None] | None = None
        self.connected = asyncio.Event()
        self.closing = False
        self._stopped = False
        self.connects = 0
        self.reads = ReadBatcher()

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="event-hub")

    async def stop(self) -> None:
        self.close_subscribers()
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
            # redis-py can swallow a cancellation that lands in a timed read: the loop also
            # checks `_stopped`, and we never wait longer than one read.
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                async with asyncio.timeout(STOP_TIMEOUT_S):
                    await self._task
            self._task = None

    def close_subscribers(self) -> None:
        """Shutdown: every follower wakes up and ends (its client resumes from its cursor)."""
        self.closing = True
        self._wake_all()

    # -- subscribers --------------------------------------------------------------------------

    def subscribe(self, stream: str) -> Subscriber:
        sub = Subscriber(stream)
        self._subs.setdefault(stream, set()).add(sub)
        return sub

    def unsubscribe(self, sub: Subscriber) -> None:
        subs = self._subs.get(sub.stream)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._subs[sub.stream]

    @property
    def subscriber_count(self) -> int:
        return sum(len(s) for s in self._subs.values())

    def _dispatch(self, data: bytes | str) -> None:
        """A doorbell's payload: the names of the event streams that grew, one per line."""
        text = data.decode() if isinstance(data, bytes) else data
        for stream in text.split("\n"):
            for sub in self._subs.get(stream, ()):
                sub.ring()

    def _wake_all(self) -> None:
        for subs in self._subs.values():
            for sub in subs:
                sub.ring()

    # -- the connection -----------------------------------------------------------------------

    def _client(self) -> RedisClient:
        # Own connection, no hidden retries: we must notice every reconnect to wake subscribers.
        return connect(self.settings, retries=0, socket_keepalive=True, health_check_interval=5)

    def _connected(self) -> None:
        self.connects += 1
        if self.connects > 1:
            log.info("event hub: pub/sub reconnected; subscribers re-read from their cursors")
            if self._on_reconnect is not None:
                self._on_reconnect()
        self.connected.set()
        # Doorbells rung while we were away are lost: everyone re-reads after its cursor.
        self._wake_all()

    async def _run(self) -> None:
        delay = BACKOFF_START_S
        while not self._stopped:
            client = self._client()
            pubsub: Any = client.pubsub()
            # In a cluster the doorbell is a sharded channel: only the queue's shard carries it.
            sharded = isinstance(client, RedisCluster)
            try:
                if sharded:
                    await pubsub.ssubscribe(self.keys.doorbell)
                else:
                    await pubsub.subscribe(self.keys.doorbell)
                while not self._stopped:
                    # A bounded wait (not get_message()'s busy default) that also runs the
                    # connection's health check now and then.
                    if sharded:
                        message = await pubsub.get_sharded_message(timeout=1.0)
                    else:
                        message = await pubsub.get_message(timeout=1.0)
                    if message is None:
                        continue
                    if message["type"] in ("message", "smessage"):
                        self._dispatch(message["data"])
                    elif message["type"] in ("subscribe", "ssubscribe"):
                        self._connected()
                        delay = BACKOFF_START_S
                    elif message["type"] == "sunsubscribe":
                        # The slot moved to another node (resharding, failover): subscribe
                        # again, where the cluster now keeps it.
                        raise ConnectionError("the doorbell's shard moved")
            except (RedisError, OSError) as exc:
                if self.connected.is_set():
                    log.warning("event hub: pub/sub connection lost: %s", exc)
                self.connected.clear()
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()
                with contextlib.suppress(Exception):
                    await client.aclose()
            await asyncio.sleep(delay)
            delay = min(delay * 2, BACKOFF_MAX_S)


def _id_key(stream_id: str) -> tuple[int, int]:
    ms, _, seq = stream_id.partition("-")
    return int(ms), int(seq or 0)


async def follow(
    queue: Queue,
    hub: EventHub,
    stream: str,
    after: str | None,
    *,
    job_id: str | None = None,
    poll_s: float = POLL_S,
) -> AsyncGenerator[tuple[str, dict[str, Any]], None]:
    """Every event of `stream` after cursor `after`, then live ones; no loss, no duplicate.

    Registers with the hub first, then replays, then re-reads on each doorbell (or safety poll).
    With `job_id`, ends after the job's terminal event (or at once when the job is over and its
    terminal event lies before the cursor, or the job expired). Ends when the hub closes.
    Use with `contextlib.aclosing` so that the subscription is released.
    """
    sub = hub.subscribe(stream)
    try:
        cursor = after if after not in (None, "", "0", "0-0") else None
        quiet = True
        delay = BACKOFF_START_S
        while not hub.closing:
            try:
                batch = await hub.reads.read(queue, stream, cursor, READ_BATCH)
                if not batch and job_id is not None and quiet:
                    # Nothing new and no doorbell: has the job ended (or expired) meanwhile?
                    state = await queue.state(job_id)
                    if state is None or state in TERMINAL_TYPES:
                        batch = await hub.reads.read(queue, stream, cursor, READ_BATCH)
                        if not batch:
                            return
            except REDIS_DOWN as exc:
                log.debug("follow %s: Redis unreachable (%s); retrying", stream, exc)
                await sub.wait(delay)
                delay = min(delay * 2, BACKOFF_MAX_S)
                continue
            delay = BACKOFF_START_S
            for at, (stream_id, event) in enumerate(batch):
                if cursor is not None and _id_key(stream_id) <= _id_key(cursor):
                    continue  # never twice, whatever a read returns
                cursor = stream_id
                # The job's end, unless it ran again after (a dead letter requeued): its next
                # run's events follow this one in the batch, or in the next one when this one
                # is full, and its followers follow them.
                ended = job_id is not None and event.get("type") in TERMINAL_TYPES
                yield stream_id, event
                if ended and at == len(batch) - 1 and len(batch) < READ_BATCH:
                    return
            if len(batch) >= READ_BATCH:
                continue
            quiet = not await sub.wait(poll_s)
    finally:
        hub.unsubscribe(sub)


class Connections:
    """Open WebSockets, so that shutdown can close them promptly (SSE handlers end when the hub
    closes their subscriptions)."""

    def __init__(self) -> None:
        self.ws: set[web.WebSocketResponse] = set()

    async def close_all(self, hub: EventHub) -> None:
        hub.close_subscribers()  # SSE handlers return after their current write
        for ws in list(self.ws):
            with contextlib.suppress(Exception):
                await ws.close(code=WSCloseCode.GOING_AWAY, message=b"server shutting down")
