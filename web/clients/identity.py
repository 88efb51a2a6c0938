"""Who is asking: a signed long-lived cookie for browsers (or the same token in a header, for
scripts that keep no cookies), a hashed API key where keys are configured; key checks.

An identity cannot be minted for free: the cookie is a random token and its HMAC under a server
secret (CHATTTS_COOKIE_SECRET, else one generated into the data directory), so a made-up or
altered cookie is a new client, and with no keys configured a Bearer token is no identity at all
(any string would be one, and a placeholder such as "unused" would be shared by strangers).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import os
import re
import secrets
from functools import lru_cache
from pathlib import Path

from aiohttp import web
from aiohttp.typedefs import Handler

from core.infra.networks import address_in
from core.infra.settings import Settings
from core.queue.lanes import KeyShare
from web.appkeys import CLIENT, CLIENT_TOKEN, COOKIE_SECRET, FORWARDED_TLS, NEW_COOKIE, SETTINGS
from web.errors import ApiError

log = logging.getLogger("chattts_online.web")

COOKIE = "tts_client"
# The cookie's value as a header, for scripts that keep no cookies: an answer that gave a new
# identity carries it (and a submit's 202 body, as `client_token`), and sending it back makes
# the script the same client. Never sent to a request that came with a valid cookie, so the
# page's JavaScript never sees its HttpOnly identity.
TOKEN_HEADER = "X-Client-Token"
COOKIE_MAX_AGE_S = 365 * 86_400
SECRET_FILE = "cookie_secret"
# A cookie we issued: a url-safe base64 token, a dot, its signature; never the "key-" namespace
# of API-key clients.
_TOKEN = re.compile(r"[A-Za-z0-9_-]{16,64}\.[A-Za-z0-9_-]{22}")
# Endpoints that need a key when keys are configured; the page, static files and probes stay open.
_PROTECTED = ("/v1/", "/tts/", "/dev/")
_PROTECTED_EXACTLY = frozenset({"/v1", "/tts"})
_DISCOVERY = frozenset({"/v1/models", "/v1/audio/voices", "/v1/audio/models"})
# What operators read, closed too with `private_metrics` (/healthz stays open: it says nothing).
_OPERATIONS = ("/metrics", "/readyz")
# ElevenLabs' API-key header, taken as a Bearer key (its SDKs and plugins send it); its paths, where
# a refusal names it.
ELEVENLABS_KEY_HEADER = "xi-api-key"
ELEVENLABS_PATHS = ("/v1/text-to-speech/",)
_COOKIE_ATTRIBUTES = f"{COOKIE}=%s; HttpOnly; Max-Age={COOKIE_MAX_AGE_S}; Path=/; SameSite=Lax"


def is_discovery(path: str) -> bool:
    """The lists front ends probe before they speak (web/views/compat/models.py)."""
    return path in _DISCOVERY or path.startswith("/v1/models/")


def bearer_key(request: web.Request) -> str | None:
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    value = value.strip()
    return value if scheme.lower() == "bearer" and value else None


def api_key(request: web.Request) -> str | None:
    """The API key a request carries: 'Authorization: Bearer', or ElevenLabs' `xi-api-key`
    header (what its SDKs and plugins send, to its speech routes and to `/v1/voices` alike)."""
    key = bearer_key(request)
    if key is None:
        key = request.headers.get(ELEVENLABS_KEY_HEADER, "").strip() or None
    return key


def _raw(value: str) -> bytes:
    """A header value's bytes again (aiohttp keeps bytes that are not UTF-8 as surrogates)."""
    return value.encode("utf-8", "surrogateescape")


def cookie_secret(settings: Settings) -> bytes:
    """CHATTTS_COOKIE_SECRET, else the data directory's own (created once, mode 0600): every
    replica of a deployment must share one, so that a cookie one issued the others accept."""
    if settings.web.cookie_secret:
        return settings.web.cookie_secret.encode()
    path = Path(settings.data_dir) / SECRET_FILE
    try:
        return path.read_bytes().strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_urlsafe(32).encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process of this machine wrote it first
        return path.read_bytes().strip()
    with os.fdopen(fd, "wb") as file:
        file.write(secret)
    log.info("identity cookies are signed with a new secret in %s", path)
    return secret


def _signature(secret: bytes, token: str) -> str:
    mac = hmac.new(secret, token.encode(), hashlib.sha256).digest()[:16]
    return base64.urlsafe_b64encode(mac).rstrip(b"=").decode()


@lru_cache(maxsize=4096)  # an HMAC per request otherwise; the process's secret does not change
def _valid_cookie(secret: bytes, value: str | None) -> bool:
    if value is None or not _TOKEN.fullmatch(value):
        return False
    token, _, signature = value.partition(".")
    return hmac.compare_digest(_signature(secret, token), signature)


def is_admin(request: web.Request) -> bool:
    """The request carries one of the admin keys (CHATTTS_ADMIN_KEYS)."""
    return is_admin_key(request, bearer_key(request))


def is_admin_key(request: web.Request, key: str | None) -> bool:
    """`key` is one of the admin keys (CHATTTS_ADMIN_KEYS)."""
    admins = request.app[SETTINGS].web.admin_key_set
    return bool(admins) and key_accepted(key, admins)


def key_client(secret: bytes, key: str) -> str:
    """The client an API key is: keyed with the server secret, so that the names of its Redis
    keys say nothing a dictionary of likely keys could find."""
    return "key-" + hmac.new(secret, _raw(key), hashlib.sha256).hexdigest()[:16]


def key_shares(settings: Settings, secret: bytes) -> dict[str, KeyShare]:
    """CHATTTS_KEY_WEIGHTS by the client id each key is known as (a bad entry stops the
    start, named)."""
    return {
        key_client(secret, key): KeyShare(weight, bulk)
        for key, (weight, bulk) in settings.scheduling.key_weight_map.items()
    }


def shown_client(client: str) -> str:
    """A client as operators see it: an API key's client id as it is, a cookie client's as a
    digest of its id (shorter, and the same across the console)."""
    if client.startswith("key-") or client in ("", "other"):
        return client
    return "cookie-" + hashlib.sha256(client.encode()).hexdigest()[:16]


def signed(secret: bytes, token: str) -> str:
    """The cookie value for `token` (16-64 url-safe characters)."""
    return f"{token}.{_signature(secret, token)}"


def _new_token(secret: bytes) -> str:
    while True:
        token = secrets.token_urlsafe(18)
        if not token.startswith("key-"):
            return signed(secret, token)


def client_id(request: web.Request) -> str:
    """The client of this request: 'key-<sha256 prefix>' with an API key, else the cookie token."""
    cached: str | None = request.get(CLIENT)
    if cached:
        return cached
    secret = request.app[COOKIE_SECRET]
    settings = request.app[SETTINGS]
    key = api_key(request) if settings.web.api_key_set else None
    if (
        key is not None
        and not settings.web.user_key_set
        and not key_accepted(key, settings.web.api_key_set)
    ):
        key = None  # only admin keys are set, and this is none: a bearer token is no identity
    if key is not None:  # an accepted key (identity_middleware refused the others)
        client = key_client(secret, key)
    else:
        cookie = request.cookies.get(COOKIE)
        header = request.headers.get(TOKEN_HEADER) or None  # an empty one is none
        if header is not None and not _valid_cookie(secret, header):
            # Sent on purpose, and not ours: a new identity would lose the caller's jobs quietly.
            raise ApiError(
                401,
                f"the {TOKEN_HEADER} header is not a token this server gave (mistyped, cut, or "
                "from another server): send the one an answer gave you, or leave the header out "
                "to get a new identity",
                code="invalid_client_token",
                param=TOKEN_HEADER,
            )
        if header is not None:  # explicit: it wins over a cookie
            token = str(header)
        elif _valid_cookie(secret, cookie):
            token = str(cookie)
        else:
            token = _new_token(secret)
            request[NEW_COOKIE] = token
        request[CLIENT_TOKEN] = token
        client = cookie_client(secret, token)
    request[CLIENT] = client
    return client


@lru_cache(maxsize=4096)  # once per request, on the submit path: an HMAC
def cookie_client(secret: bytes, token: str) -> str:
    """A cookie client's id: derived from its (signed) cookie, never the cookie itself, so that
    whoever reads Redis's key names or a job's record cannot act as that client."""
    digest = hmac.new(secret, b"cookie-client." + token.encode(), hashlib.sha256).hexdigest()
    return f"c-{digest[:32]}"


def from_operators_network(request: web.Request) -> bool:
    """Whether the peer (its client, behind a trusted proxy) may read the operators' figures."""
    networks = request.app[SETTINGS].web.metrics_peers
    return networks is None or address_in(request.remote, networks)


def key_accepted(key: str | None, accepted: frozenset[str]) -> bool:
    if key is None:
        return False
    given = _raw(key)
    # Compare against every key (no early exit) so timing says nothing about which one is close.
    results = [hmac.compare_digest(given, _raw(k)) for k in accepted]
    return any(results)


@web.middleware
async def identity_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    settings = request.app[SETTINGS]
    accepted = settings.web.api_key_set
    # The API needs a key when API keys are set; the operators' figures (private_metrics)
    # when any key is, an admin key included.
    api = api_path = request.path in _PROTECTED_EXACTLY or request.path.startswith(_PROTECTED)
    if api and request.method == "GET" and is_discovery(request.path):
        api = settings.web.discovery_needs_key
    operations = settings.web.private_metrics and request.path in _OPERATIONS
    required = (api and settings.web.user_key_set) or (operations and accepted)
    key = api_key(request)
    if required and not key_accepted(key, accepted):
        also = " (or 'xi-api-key: <key>')" if request.path.startswith(ELEVENLABS_PATHS) else ""
        message = (
            "this server requires an API key: send 'Authorization: Bearer <key>'" + also
            if key is None
            else "the API key sent is not one of this server's keys (CHATTTS_API_KEYS): check "
            "it for a typo or a stale key"
        )
        raise ApiError(
            401,
            message,
            code="invalid_api_key",
            headers={"WWW-Authenticate": 'Bearer realm="chattts-online"'},
        )
    if api_path:  # who the caller is (a mistyped X-Client-Token refused: the API's concern only)
        client_id(request)
    return await handler(request)


async def set_client_cookie(request: web.Request, response: web.StreamResponse) -> None:
    """on_response_prepare: give every response to a cookie-less client its identity cookie
    (not an OPTIONS answer: a browser's preflight, which carries no cookie and keeps none)."""
    if request.method == "OPTIONS":
        return
    cookie = request.cookies.get(COOKIE)
    token = request.get(CLIENT_TOKEN)
    if token is not None and token in (cookie, request.headers.get(TOKEN_HEADER)):
        return  # client_id verified this very token: no second HMAC on every answer
    secret = request.app[COOKIE_SECRET]
    header = request.headers.get(TOKEN_HEADER) or None
    if _valid_cookie(secret, cookie) or header is not None:
        return  # a valid header, or a mistyped one refused: no new identity in its place
    token = request.get(NEW_COOKIE) or _new_token(secret)
    request[NEW_COOKIE] = token
    # Headers are already assembled when this hook runs: add the header itself. Written out as
    # http.cookies.SimpleCookie would (the token is url-safe base64, nothing to quote), at a
    # fraction of its cost: this runs for every answer to a cookie-less client (scripts too).
    secure = "; Secure" if request.get(FORWARDED_TLS, request.secure) else ""
    response.headers.add("Set-Cookie", f"{_COOKIE_ATTRIBUTES % token}{secure}")
    response.headers[TOKEN_HEADER] = token
    # An answer that mints an identity is that client's alone: no shared cache may keep it.
    if "no-store" not in response.headers.get("Cache-Control", ""):
        response.headers["Cache-Control"] = "no-store"


def new_client_token(request: web.Request) -> str | None:
    """The identity this request was just given (None: it came with one, cookie or header):
    what a cookie-less script sends back as `X-Client-Token` to stay the same client."""
    return request.get(NEW_COOKIE)
