"""Who is asking: a long-lived cookie for browsers, a hashed API key for scripts; key checks."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

from aiohttp import web
from aiohttp.typedefs import Handler

from .appkeys import CLIENT, NEW_COOKIE, SETTINGS
from .errors import ApiError

COOKIE = "tts_client"
COOKIE_MAX_AGE_S = 365 * 86_400
# A cookie we issued: url-safe base64, never the "key-" namespace of API-key clients.
_TOKEN = re.compile(r"[A-Za-z0-9_-]{16,64}")
# Endpoints that need a key when keys are configured; the page, static files and probes stay open.
_PROTECTED = ("/v1/", "/tts/")
_COOKIE_ATTRIBUTES = f"{COOKIE}=%s; HttpOnly; Max-Age={COOKIE_MAX_AGE_S}; Path=/; SameSite=Lax"


def bearer_key(request: web.Request) -> str | None:
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    value = value.strip()
    return value if scheme.lower() == "bearer" and value else None


def _raw(value: str) -> bytes:
    """A header value's bytes again (aiohttp keeps bytes that are not UTF-8 as surrogates)."""
    return value.encode("utf-8", "surrogateescape")


def _valid_cookie(value: str | None) -> bool:
    return value is not None and bool(_TOKEN.fullmatch(value)) and not value.startswith("key-")


def _new_token() -> str:
    while True:
        token = secrets.token_urlsafe(18)
        if _valid_cookie(token):
            return token


def client_id(request: web.Request) -> str:
    """The client of this request: 'key-<sha256 prefix>' with an API key, else the cookie token."""
    cached: str | None = request.get(CLIENT)
    if cached:
        return cached
    key = bearer_key(request)
    if key is not None:
        client = "key-" + hashlib.sha256(_raw(key)).hexdigest()[:16]
    else:
        cookie = request.cookies.get(COOKIE)
        if cookie is not None and _valid_cookie(cookie):
            client = cookie
        else:
            client = _new_token()
            request[NEW_COOKIE] = client
    request[CLIENT] = client
    return client


def _key_accepted(key: str | None, accepted: frozenset[str]) -> bool:
    if key is None:
        return False
    given = _raw(key)
    # Compare against every key (no early exit) so timing says nothing about which one is close.
    results = [hmac.compare_digest(given, _raw(k)) for k in accepted]
    return any(results)


@web.middleware
async def identity_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    accepted = request.app[SETTINGS].api_key_set
    protected = request.path == "/v1" or request.path.startswith(_PROTECTED)
    if accepted and protected and not _key_accepted(bearer_key(request), accepted):
        raise ApiError(
            401,
            "this server requires an API key: send 'Authorization: Bearer <key>'",
            code="invalid_api_key",
            headers={"WWW-Authenticate": 'Bearer realm="chattts-online"'},
        )
    client_id(request)
    return await handler(request)


async def set_client_cookie(request: web.Request, response: web.StreamResponse) -> None:
    """on_response_prepare: give every response to a cookie-less client its identity cookie."""
    if _valid_cookie(request.cookies.get(COOKIE)):
        return
    token = request.get(NEW_COOKIE) or _new_token()
    request[NEW_COOKIE] = token
    # Headers are already assembled when this hook runs: add the header itself. Written out as
    # http.cookies.SimpleCookie would (the token is url-safe base64, nothing to quote), at a
    # fraction of its cost: this runs for every answer to a cookie-less client (scripts too).
    secure = "; Secure" if request.secure else ""
    response.headers.add("Set-Cookie", f"{_COOKIE_ATTRIBUTES % token}{secure}")
