"""Keys guessed from one address: each wrong API or admin key is charged to the address, and
past a burst every key it sends is refused before it is checked; a console session signed out
is refused everywhere (web/clients/operators.py). A right key is always let through."""

from __future__ import annotations

import time

from aiohttp import web
from aiohttp.typedefs import Handler

from core.queue.limits import Bucket
from web.appkeys import QUEUE, SESSION_REVOKED, SETTINGS, SUSPECTS
from web.clients.identity import api_key, key_accepted
from web.clients.limits import RateLimited
from web.clients.operators import SESSION_COOKIE, session_of
from web.errors import ApiError
from web.monitors.memory import address

# Wrong keys an address may send: ten at once, then one every ten seconds (a person mistyping
# is far below; a guesser gets 8,640 tries a day instead of thousands a second).
WRONG_KEYS_PER_S = 0.1
WRONG_KEYS_BURST = 10
WRONG_KEY_CODES = frozenset({"invalid_api_key", "not_an_admin"})
# Addresses that sent a wrong key lately: only their keyed requests ask Redis first.
SUSPECT_S = 3_600.0
SUSPECTS_KEPT = 65_536


@web.middleware
async def key_guesses_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    keyed = api_key(request) is not None or request.path == "/admin/session"
    if SESSION_COOKIE in request.cookies and request.path.startswith("/admin"):
        session = session_of(request)
        if session is not None and await request.app[QUEUE].console.session_revoked(session[2]):
            request[SESSION_REVOKED] = True
    if not keyed:
        return await handler(request)
    source = address(request)
    bucket = Bucket("address", source, WRONG_KEYS_PER_S, WRONG_KEYS_BURST)
    limits = request.app[QUEUE].limits
    suspects = request.app[SUSPECTS]
    # A right key is let through whoever else guessed from its address (a shared office, a
    # NAT): what is refused is the next guess, not the operator who holds the key.
    right = key_accepted(api_key(request), request.app[SETTINGS].web.api_key_set)
    if not right and suspects.get(source, 0.0) > time.monotonic():
        refused = await limits.take("wrong_keys", [bucket], peek=True)
        if refused is not None:
            raise _too_many(refused[1])
    try:
        return await handler(request)
    except ApiError as exc:
        if exc.code in WRONG_KEY_CODES:
            if len(suspects) >= SUSPECTS_KEPT:
                suspects.clear()  # (they are asked again once they fail again)
            suspects[source] = time.monotonic() + SUSPECT_S
            refused = await limits.take("wrong_keys", [bucket])
            if refused is not None:
                raise _too_many(refused[1]) from None
        raise


def _too_many(wait_s: float) -> RateLimited:
    return RateLimited(
        "wrong keys from this address",
        f"{WRONG_KEYS_BURST} at once, then one per {1 / WRONG_KEYS_PER_S:g} s",
        wait_s,
        "; every key from this address is refused until then",
    )
