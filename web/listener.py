"""The web process's listening socket: deadlines on request headers and bodies, a cap of open
connections per source address counted at accept, and accept failures logged once a second."""

from __future__ import annotations

import asyncio
import heapq
import ipaddress
import logging
import resource
import time
from collections.abc import Iterable
from typing import Any

import orjson
from aiohttp import web
from aiohttp.http_parser import RawRequestMessage
from aiohttp.streams import EMPTY_PAYLOAD, StreamReader
from aiohttp.web_protocol import RequestHandler
from redis.exceptions import ResponseError

from core.infra.redis_client import REDIS_DOWN
from core.queue.limits import Limits
from web.monitors.memory import source_of

log = logging.getLogger("chattts_online.web")

# A body must have arrived this long after its headers: the body reader answers 408 at this
# point; the listener closes connections whose handler never reads the rest, a little later.
BODY_TIMEOUT_S = 30.0
_BODY_BACKSTOP_S = BODY_TIMEOUT_S + 5.0
# The descriptors a web process asks for (its soft limit, up to the hard one): a connection is
# one, and 1,024 (the usual default) is a few hundred clients with their streams.
DESCRIPTORS_WANTED = 1 << 16
_ACCEPT_FAILURE = "socket.accept() out of system resource"
# The processes tell each other their sources with many connections this often, the most
# REPORTED_SOURCES each: the cap holds across the fleet within a second.
CENSUS_EVERY_S = 1.0
REPORTED_SOURCES = 256


def raise_descriptor_limit(wanted: int = DESCRIPTORS_WANTED) -> int:
    """Raise the soft RLIMIT_NOFILE towards `wanted` (never past the hard limit); the limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:  # a container may forbid it: say so, go on
            log.warning("could not raise the open-files limit from %d to %d: %s", soft, target, exc)
    return soft


class ConnectionCounter:
    """Open connections by source address (an IPv6 /64 is one), capped at `per_address` (0: no
    cap) across the web processes of one queue; the proxies' own addresses are not capped (their
    clients are many)."""

    def __init__(self, per_address: int, proxies: Iterable[Any] = ()) -> None:
        self.per_address = per_address
        self._proxies = tuple(proxies)
        self._open: dict[str, int] = {}
        # The other web processes' connections by source, as their last reports say (census).
        self.elsewhere: dict[str, int] = {}
        self._reported: set[str] = set()

    def admit(self, remote: str | None) -> str | None:
        """Count a new connection from `remote`; its source, or None when it is one too many."""
        source = source_of(remote)
        held = self._open.get(source, 0)
        everywhere = held + self.elsewhere.get(source, 0)
        if self.per_address and everywhere >= self.per_address and not self._from_proxy(remote):
            return None
        self._open[source] = held + 1
        return source

    def release(self, source: str) -> None:
        held = self._open.get(source, 0) - 1
        if held > 0:
            self._open[source] = held
        else:
            self._open.pop(source, None)

    def many(self) -> dict[str, int]:
        """The sources holding an eighth of the cap or more here (the most REPORTED_SOURCES):
        what the other processes need to know to keep the cap across the fleet."""
        least = max(1, self.per_address // 8)
        heavy = [(count, source) for source, count in self._open.items() if count >= least]
        many = {source: count for count, source in heapq.nlargest(REPORTED_SOURCES, heavy)}
        # Those reported last time and fewer now are reported once more, at what they hold.
        fewer = {source: self._open.get(source, 0) for source in self._reported - set(many)}
        self._reported = set(many)
        return {**fewer, **many}

    async def census(self, limits: Limits, process: str, every_s: float = CENSUS_EVERY_S) -> None:
        """Each `every_s`, report this process's sources with many connections and learn the
        other processes' (a report lapses after three rounds: a process that stops is forgotten).
        Redis out of reach: each process keeps its own cap alone until it is back."""
        failing = False
        while True:
            try:
                self.elsewhere = await limits.census(process, self.many(), 3 * every_s)
                failing = False
            except (*REDIS_DOWN, ResponseError) as exc:
                if not failing:
                    log.warning("connections per address: the fleet count is unreachable: %s", exc)
                failing, self.elsewhere = True, {}
            await asyncio.sleep(every_s)

    def _from_proxy(self, remote: str | None) -> bool:
        if not self._proxies:
            return False
        try:
            ip = ipaddress.ip_address(remote or "")
        except ValueError:
            return False
        return any(ip in network for network in self._proxies)


def _refusal(per_address: int) -> bytes:
    body = orjson.dumps(
        {
            "error": {
                "code": "too_many_connections",
                "message": f"this address has {per_address} connections open to this server "
                "already; close some (or reuse them: keep-alive) and try again",
            }
        }
    )
    head = (
        "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


class GuardedHandler(RequestHandler):
    """aiohttp's protocol with the deadlines and the cap aiohttp has no setting for. It reads
    three of aiohttp's private fields (the parsed messages, their count, a request in progress):
    a test drives each deadline against a real process, so an aiohttp that renames them fails
    there, not in use."""

    def __init__(
        self, manager: web.Server, counter: ConnectionCounter, header_timeout_s: float, **kw: Any
    ) -> None:
        super().__init__(manager, **kw)
        self._counter = counter
        self._header_timeout_s = header_timeout_s
        self._source: str | None = None
        self._headers_due: asyncio.TimerHandle | None = None
        self._body_due: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        peer = transport.get_extra_info("peername")
        self._source = self._counter.admit(peer[0] if peer else None)
        if self._source is None:
            assert isinstance(transport, asyncio.Transport)
            transport.write(_refusal(self._counter.per_address))
            transport.close()
            return
        super().connection_made(transport)
        self._expect_headers()  # a connection that never sends a byte is closed too

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._source is None:
            return  # refused at accept: never served
        self._counter.release(self._source)
        self._source = None
        for handle in (self._headers_due, self._body_due):
            if handle is not None:
                handle.cancel()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._source is None:
            return  # refused at accept: its bytes are not read
        idle = not (self._request_in_progress or self._messages or self._upgraded)
        if idle and self._headers_due is None:
            self._expect_headers()  # the first byte of the next request on a kept-alive one
        count = self._request_count
        super().data_received(data)
        if self._request_count == count:
            return
        # A request's headers are in: its body (if any) has a deadline of its own.
        if self._headers_due is not None:
            self._headers_due.cancel()
            self._headers_due = None
        message, payload = self._messages[-1] if self._messages else (None, EMPTY_PAYLOAD)
        has_body = isinstance(payload, StreamReader) and payload is not EMPTY_PAYLOAD
        if isinstance(message, RawRequestMessage) and has_body and not payload.is_eof():
            if self._body_due is not None:
                self._body_due.cancel()
            self._body_due = self._loop.call_later(_BODY_BACKSTOP_S, self._body_overdue, payload)

    def _expect_headers(self) -> None:
        self._headers_due = self._loop.call_later(self._header_timeout_s, self._headers_overdue)

    def _headers_overdue(self) -> None:
        self._headers_due = None
        if self._request_in_progress or self._messages or self._upgraded:
            return  # a request is being answered: its headers came
        self._close_now()

    def _body_overdue(self, payload: StreamReader) -> None:
        self._body_due = None
        if payload.is_eof():
            return
        payload.set_exception(TimeoutError("the request body did not arrive in time"))
        self._close_now()

    def _close_now(self) -> None:
        self.force_close()
        if self.transport is not None:
            self.transport.close()


class GuardedServer(web.Server):
    """aiohttp's server, making GuardedHandlers."""

    def __init__(
        self, *args: Any, counter: ConnectionCounter, header_timeout_s: float, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.counter = counter
        self.header_timeout_s = header_timeout_s

    def __call__(self) -> RequestHandler:
        return GuardedHandler(
            self, self.counter, self.header_timeout_s, loop=self._loop, **self._kwargs
        )


class AcceptFailures:
    """The loop's exception handler: accept failures (descriptors or memory exhausted) logged
    once a second with their count, as asyncio would log each of them (thousands a second)."""

    def __init__(self, every_s: float = 1.0) -> None:
        self.every_s = every_s
        self._unsaid = 0
        self._last = 0.0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") != _ACCEPT_FAILURE:
            loop.default_exception_handler(context)
            return
        self._unsaid += 1
        now = time.monotonic()
        if now - self._last >= self.every_s:
            log.error(
                "%s (%d times since the last report): %s",
                _ACCEPT_FAILURE,
                self._unsaid,
                context.get("exception"),
            )
            self._last, self._unsaid = now, 0
