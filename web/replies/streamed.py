"""A job's answer streamed over HTTP as it is made: opened at its first byte (a failure before is
a plain error answer), stopped when its client goes, cut short by a failure after its first byte
(an incomplete transfer, or the protocol's own error at its tail: never a truncated success)."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable

from aiohttp import web

from web.errors import ApiError
from web.following import Closing, closing_error
from web.replies.sending import paced_write
from web.replies.waiting import unless_gone


class Streamed:
    """One streamed answer: `write` its bytes from `answer`'s work."""

    def __init__(
        self,
        request: web.Request,
        job_id: str,
        content_type: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.request, self.job_id = request, job_id
        self.headers = {
            "Content-Type": content_type,
            "Cache-Control": "no-cache",
            "X-Job-Id": job_id,
            **(headers or {}),
        }
        self.response: web.StreamResponse | None = None

    async def open(self) -> web.StreamResponse:
        if self.response is None:
            response = web.StreamResponse(headers=self.headers)
            response.enable_chunked_encoding()
            await response.prepare(self.request)
            self.response = response
        return self.response

    async def write(self, data: bytes) -> None:
        """Bytes out, paced by the address's send rate (TimeoutError: the client stopped
        reading)."""
        response = await self.open()
        await paced_write(self.request, response.write, data)

    async def answer(
        self,
        work: Awaitable[None],
        tail: Callable[[ApiError], Awaitable[None]] | None = None,
    ) -> web.StreamResponse:
        """Run `work` (which writes) until it ends or the client goes; a failure after the first
        byte ends the body with `tail` (an SSE error event), else by closing the connection."""
        request, failure = self.request, None
        try:
            done, _ = await unless_gone(request, work)
            if done:
                await self.open()  # no audio at all: still an (empty) successful answer
        except ApiError as exc:
            failure = exc
        except Closing:
            failure = closing_error(self.job_id)
        except (ConnectionError, TimeoutError):  # the client left, or stopped reading
            if request.transport is not None:
                request.transport.abort()
            return self.response or self._gone()
        if self.response is None:
            if failure is not None:
                raise failure
            return self._gone()
        if failure is not None:
            if tail is not None:
                with contextlib.suppress(ConnectionError, TimeoutError):
                    await tail(failure)
            elif request.transport is not None:
                request.transport.close()  # the body ends short: the client sees a broken transfer
        return self.response

    def _gone(self) -> web.Response:
        return web.Response(status=499, headers={"X-Job-Id": self.job_id})
