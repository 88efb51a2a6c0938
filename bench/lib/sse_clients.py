"""SSE client process of bench/sse_capacity.py: holds many `/v1/events` streams and counts events.

`python -m bench.lib.sse_clients HOST PORT FIRST COUNT SHARE`: opens COUNT streams, stream i (from
FIRST) as browser client `client_token(i // SHARE)` (its cookie), with a bare asyncio protocol
per connection (no HTTP client library: the client side must stay light next to the server).
Talks JSON lines with its parent: prints `{"ready": n}` once every stream answered 200, reads
`{"expect": E, "timeout": s}`, prints `{"done": ...}` when every stream got E events (or at the
timeout, with the counts), then closes everything at `{"close": true}` or end of input.
A stream answered with another status or closed early is reported as a failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import resource
import sys
import time
from collections.abc import Sequence

from bench.lib.identities import client_id, cookie_value

CONNECT_CONCURRENCY = 64
CONNECT_TIMEOUT_S = 60.0
_EVENT = b"\r\nevent: "  # every event we send has an id line, then its type


def client_token(group: int) -> str:
    """The `tts_client` cookie of simulated browser `group`."""
    return cookie_value(f"ssebench{group:012d}")


def client_of(group: int) -> str:
    """The server's id of simulated browser `group` (derived from its cookie)."""
    return client_id(f"ssebench{group:012d}")


class Stream(asyncio.Protocol):
    def __init__(self, request: bytes) -> None:
        self.request = request
        self.head = b""
        self.tail = b""
        self.events = 0
        self.counted = False  # reached the expected number of events
        self.status: int | None = None
        self.error: str | None = None
        self.answered: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        if self.status is None:
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                return
            self.status = int(self.head.split(b" ", 2)[1])
            data, self.head = self.head[end:], b""  # keep the "\r\n\r\n": the first event follows
            if self.status != 200:
                self.fail(f"HTTP {self.status}")
                return
            if not self.answered.done():
                self.answered.set_result(None)
        window = self.tail + data
        self.events += window.count(_EVENT)
        self.tail = window[-(len(_EVENT) - 1) :]
        COUNTER.seen(self)

    def fail(self, why: str) -> None:
        if self.error is None:
            self.error = why
        if not self.answered.done():
            self.answered.set_exception(ConnectionError(why))
        COUNTER.failed()

    def connection_lost(self, exc: Exception | None) -> None:
        if not COUNTER.closing:
            self.fail(f"closed by the server ({exc!r})")


class Counter:
    """Streams that reached the expected number of events, and when the last one did."""

    def __init__(self) -> None:
        self.expect: int | None = None
        self.reached = 0
        self.total = 0
        self.last_at = 0.0
        self.closing = False
        self.all_done = asyncio.Event()

    def seen(self, stream: Stream) -> None:
        if self.expect is None or stream.counted or stream.error is not None:
            return
        if stream.events >= self.expect:
            stream.counted = True
            self.reached += 1
            self.last_at = time.time()
            if self.reached == self.total:
                self.all_done.set()

    def failed(self) -> None:
        if not self.closing:
            self.all_done.set()  # no point waiting: report at once


COUNTER: Counter


async def _lines() -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    return reader


def _say(obj: object) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


async def run(host: str, port: int, first: int, count: int, share: int) -> int:
    global COUNTER
    COUNTER = Counter()
    COUNTER.total = count
    loop = asyncio.get_running_loop()
    streams: list[Stream] = []
    gate = asyncio.Semaphore(CONNECT_CONCURRENCY)

    async def open_one(i: int) -> None:
        request = (
            f"GET /v1/events HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: text/event-stream\r\n"
            f"Cookie: tts_client={client_token(i // share)}\r\n\r\n"
        ).encode()
        stream = Stream(request)
        streams.append(stream)
        async with gate:
            await loop.create_connection(lambda: stream, host, port)
            await stream.answered

    reader = await _lines()
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT_S + count / 100):
            await asyncio.gather(*(open_one(i) for i in range(first, first + count)))
    except (OSError, TimeoutError) as exc:
        errors = [s.error for s in streams if s.error]
        _say({"error": f"opening streams: {exc!r}; {len(errors)} failed, first: {errors[:1]}"})
        return 1
    _say({"ready": len(streams)})
    order = json.loads(await reader.readline())
    COUNTER.expect = int(order["expect"])
    for stream in streams:
        COUNTER.seen(stream)
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(float(order["timeout"])):
            await COUNTER.all_done.wait()
    counts = [s.events for s in streams]
    _say(
        {
            "done": COUNTER.reached,
            "streams": len(streams),
            "min_events": min(counts),
            "max_events": max(counts),
            "events": sum(counts),
            "last_at": COUNTER.last_at,
            "errors": [s.error for s in streams if s.error][:3],
        }
    )
    await reader.readline()  # {"close": true} or end of input
    COUNTER.closing = True
    for stream in streams:
        if stream.transport is not None:
            stream.transport.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    host, port, first, count, share = (argv if argv is not None else sys.argv[1:])[:5]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return asyncio.run(run(host, int(port), int(first), int(count), int(share)))


if __name__ == "__main__":
    sys.exit(main())
