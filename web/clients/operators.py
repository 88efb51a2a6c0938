"""Who may use the operators' console: an admin key (CHATTTS_ADMIN_KEYS) sent as a bearer token,
or the console page's session cookie signed for one; and the name the audit stream records.

The page needs a cookie: an EventSource cannot send an Authorization header. The cookie names a
key by its hash, never the key, and lapses after SESSION_S; removing the key from the setting
ends its sessions at once, and signing out ends that session everywhere (its signature is kept
as revoked until it would lapse: web/clients/key_guesses.py). State changes through it pass
the cross-site guard as any other (web/middlewares/origin.py).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from functools import lru_cache

from aiohttp import web

from web.appkeys import COOKIE_SECRET, FORWARDED_TLS, SESSION_REVOKED, SETTINGS
from web.clients.identity import bearer_key, key_accepted
from web.errors import ApiError

SESSION_COOKIE = "chattts_admin"
# A working day at the console; signing in again takes the key once more.
SESSION_S = 12 * 3_600
# A person's name for the audit stream beside the key's (the CLI sends the login name).
OPERATOR_HEADER = "X-Operator"
_OPERATOR_NAME = re.compile(r"[\w .@+-]{1,64}")
_SESSION = re.compile(r"(\d{1,12})\.([0-9a-f]{16})\.([0-9a-f]{32})")


def _key_id(secret: bytes, key: str) -> str:
    return hmac.new(secret, b"admin-key." + key.encode(), hashlib.sha256).hexdigest()[:16]


@lru_cache(maxsize=8)
def _labels(secret: bytes, admin_keys: frozenset[str]) -> dict[str, str]:
    """Each admin key's id (in session cookies) -> its name in the audit: its last characters,
    as much of a secret as a receipt shows."""
    return {_key_id(secret, key): f"admin …{key[-4:]}" for key in admin_keys}


def _sign(secret: bytes, expires: int, key_id: str) -> str:
    message = f"admin-session.{expires}.{key_id}".encode()
    return hmac.new(secret, message, hashlib.sha256).hexdigest()[:32]


def session_cookie(request: web.Request, key: str) -> str:
    """The Set-Cookie value of a console session for admin `key` (checked by the caller)."""
    secret = request.app[COOKIE_SECRET]
    expires, key_id = int(time.time()) + SESSION_S, _key_id(secret, key)
    value = f"{expires}.{key_id}.{_sign(secret, expires, key_id)}"
    secure = "; Secure" if request.get(FORWARDED_TLS, request.secure) else ""
    return (
        f"{SESSION_COOKIE}={value}; HttpOnly; Max-Age={SESSION_S}; Path=/admin; "
        f"SameSite=Strict{secure}"
    )


def ended_session_cookie() -> str:
    return f"{SESSION_COOKIE}=; HttpOnly; Max-Age=0; Path=/admin; SameSite=Strict"


def session_of(request: web.Request) -> tuple[int, str, str] | None:
    """The console session this request carries, signed by this service and not lapsed:
    (expires, key id, signature); None otherwise."""
    match = _SESSION.fullmatch(request.cookies.get(SESSION_COOKIE, ""))
    if match is None:
        return None
    expires, key_id, signature = int(match[1]), match[2], match[3]
    secret = request.app[COOKIE_SECRET]
    if not hmac.compare_digest(_sign(secret, expires, key_id), signature):
        return None
    if expires < time.time():
        return None
    return expires, key_id, signature


def _session_label(request: web.Request) -> str | None:
    session = session_of(request)
    if session is None or request.get(SESSION_REVOKED):
        return None
    secret = request.app[COOKIE_SECRET]
    return _labels(secret, request.app[SETTINGS].web.admin_key_set).get(session[1])


def operator(request: web.Request) -> str | None:
    """The operator behind this request, as the audit names them (None: not an operator)."""
    admins = request.app[SETTINGS].web.admin_key_set
    if not admins:
        return None
    key = bearer_key(request)
    if key is not None:
        if not key_accepted(key, admins):
            return None
        label: str | None = f"admin …{key[-4:]}"
    else:
        label = _session_label(request)
    if label is None:
        return None
    person = request.headers.get(OPERATOR_HEADER, "").strip()
    return f"{label} ({person})" if _OPERATOR_NAME.fullmatch(person) else label


def require_operator(request: web.Request) -> str:
    """The operator behind this request, or the answer that says what is missing."""
    who = operator(request)
    if who is not None:
        return who
    if not request.app[SETTINGS].web.admin_key_set:
        raise ApiError(
            403,
            "the operators' console is off: set CHATTTS_ADMIN_KEYS (comma-separated keys) on "
            "the web processes to use it",
            code="console_off",
        )
    if bearer_key(request) is None and SESSION_COOKIE not in request.cookies:
        raise ApiError(
            401,
            "the console needs an admin key: send 'Authorization: Bearer <key>' with one of "
            "CHATTTS_ADMIN_KEYS, or sign in on /admin",
            code="admin_key_required",
            headers={"WWW-Authenticate": 'Bearer realm="chattts-online admin"'},
        )
    raise ApiError(
        403,
        "this key (or console session) is not one of CHATTTS_ADMIN_KEYS, or the session "
        "lapsed: sign in again with an admin key",
        code="not_an_admin",
    )
