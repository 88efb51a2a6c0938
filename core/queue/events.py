"""Reading the queue's event streams: after a cursor, several at once, one event, the last one."""

from __future__ import annotations

from typing import Any

import orjson

from core.infra.redis_client import RedisClient
from core.queue.scripts import as_text

Event = tuple[str, dict[str, Any]]  # (stream id, the event)


def _events(entries: Any) -> list[Event]:
    return [(as_text(entry_id), orjson.loads(fields[b"data"])) for entry_id, fields in entries]


class EventLog:
    """The event streams of one queue (a job's, a client's), read-only."""

    def __init__(self, redis: RedisClient) -> None:
        self._redis = redis

    async def after(self, stream: str, cursor: str | None, count: int = 100) -> list[Event]:
        """Events of `stream` strictly after stream id `cursor` (None: from the beginning)."""
        start = f"({cursor}" if cursor and cursor not in ("0", "0-0") else "-"
        entries: Any = await self._redis.xrange(stream, min=start, max="+", count=count)
        return _events(entries)

    async def before(self, stream: str, cursor: str | None, count: int = 100) -> list[Event]:
        """Events of `stream` strictly before stream id `cursor`, newest first (None: from the
        newest)."""
        end = f"({cursor}" if cursor else "+"
        entries: Any = await self._redis.xrevrange(stream, max=end, min="-", count=count)
        return _events(entries)

    async def after_each(
        self, cursors: dict[str, str], count: int
    ) -> dict[str, list[Event] | Exception]:
        """Several streams in one round trip (XREAD, all in the queue's slot): the events after
        each stream's cursor, for the streams that have any; an entry that is not one of our
        events is that stream's error alone."""
        reply: Any = await self._redis.xread(cursors, count=count)  # type: ignore[arg-type]
        found: dict[str, list[Event] | Exception] = {}
        pairs = reply.items() if isinstance(reply, dict) else (reply or [])
        for name, entries in pairs:
            if entries and isinstance(entries[0], list):  # RESP3's shape: [[entries]]
                entries = entries[0]
            try:
                found[as_text(name)] = _events(entries)
            except Exception as exc:
                found[as_text(name)] = exc
        return found

    async def at(self, stream: str, event_id: str) -> Event | None:
        """The event with stream id `event_id`, if it is still kept."""
        entries: Any = await self._redis.xrange(stream, min=event_id, max=event_id)
        return _events(entries)[0] if entries else None

    async def last(self, stream: str) -> Event | None:
        """The stream's latest event, if any is kept."""
        entries: Any = await self._redis.xrevrange(stream, max="+", min="-", count=1)
        return _events(entries)[0] if entries else None
