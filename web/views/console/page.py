"""The console page at `/admin` (templates/admin.html, static/admin.js): signing in and out with an
admin key, and the live view it follows over Server-Sent Events."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import aiohttp_jinja2
from aiohttp import web
from aiohttp_sse import EventSourceResponse
from redis.exceptions import RedisError

from web.appkeys import HUB, QUEUE, SETTINGS
from web.clients.identity import is_admin_key
from web.clients.limits import stream_lease
from web.clients.operators import (
    ended_session_cookie,
    operator,
    require_operator,
    session_cookie,
    session_of,
)
from web.errors import ApiError, dumps, json_response
from web.intake.bodies import json_body
from web.replies.console import dead_letter_page, queue_view, speech_quality, workers_page
from web.replies.sending import send_timeout_s
from web.schemas.admin import MAX_KEY_CHARS
from web.schemas.console_answers import SignedIn

log = logging.getLogger("chattts_online.web.admin")

# The live view's period: what an operator watching a queue drain expects, at one reading of the
# queue a second per open console (a few round trips to Redis).
LIVE_PERIOD_S = 1.0


async def page(request: web.Request) -> web.StreamResponse:
    """The console; its sign-in form when the request has no operator."""
    context = {
        "console_on": bool(request.app[SETTINGS].web.admin_key_set),
        "operator": operator(request),
        "queue": request.app[QUEUE].keys.queue,
    }
    return aiohttp_jinja2.render_template("admin.html", request, context)


async def sign_in(request: web.Request) -> web.Response:
    """POST /admin/session {"key": ...}: a console session for this admin key (a cookie)."""
    body = await json_body(request)
    key = body.get("key") if isinstance(body, dict) else None
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_CHARS:
        raise ApiError(400, 'send {"key": "<an admin key>"}', code="invalid_body", param="key")
    if not request.app[SETTINGS].web.admin_key_set:
        require_operator(request)  # the console-off answer
    if not is_admin_key(request, key):
        raise ApiError(403, "that key is not one of CHATTTS_ADMIN_KEYS", code="not_an_admin")
    signed: SignedIn = {"signed_in": True}
    response = json_response(signed)
    response.headers.add("Set-Cookie", session_cookie(request, key))
    return response


async def sign_out(request: web.Request) -> web.Response:
    session = session_of(request)
    if session is not None:  # ended everywhere, not only in this browser
        expires, _, signature = session
        await request.app[QUEUE].console.revoke_session(signature, expires)
    signed: SignedIn = {"signed_in": False}
    response = json_response(signed)
    response.headers.add("Set-Cookie", ended_session_cookie())
    return response


async def live(request: web.Request) -> web.StreamResponse:
    """GET /admin/v1/live: a `console` event every LIVE_PERIOD_S with the queue, the workers and
    the newest dead letters; it ends when the client goes or the server stops (with the event
    hub's followers, at shutdown)."""
    require_operator(request)
    async with stream_lease(request):
        ping_s = request.app[SETTINGS].web.sse_ping_s
        response = EventSourceResponse(ping_interval=ping_s, send_timeout=send_timeout_s(ping_s))
        await response.prepare(request)
        pinging = asyncio.create_task(response.wait())
        queue, hub = request.app[QUEUE], request.app[HUB]
        try:
            # The session is checked again each time: a lapsed or removed key ends the view.
            while not pinging.done() and not hub.closing and operator(request) is not None:
                try:
                    workers = await workers_page(queue)
                    view = {
                        "queue": await queue_view(queue),
                        "workers": workers,
                        "quality": speech_quality(workers),
                        "dead_letters": await dead_letter_page(queue, 20),
                    }
                except (RedisError, OSError) as exc:
                    view = {"error": f"Redis did not answer: {exc}"[:300]}
                await response.send(dumps(view), event="console")
                await asyncio.wait({pinging}, timeout=LIVE_PERIOD_S)
        except (ConnectionResetError, RuntimeError, TimeoutError):
            pass  # the console went away: nothing to tell it
        finally:
            pinging.cancel()
            with contextlib.suppress(BaseException):
                await pinging
        return response
