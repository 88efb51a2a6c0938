"""CORS for the API: pages of the origins in CHATTTS_ALLOWED_ORIGINS call it and read its answers,
errors included; off (no CORS header, every preflight refused) while the setting is empty."""

from __future__ import annotations

import re

from aiohttp import web
from aiohttp.typedefs import Handler

from web.appkeys import SETTINGS
from web.errors import ApiError
from web.middlewares.origin import configured_origins

# The paths a page of another origin may call; the page, the console and the probes stay
# same-origin.
_API_PREFIXES = ("/v1/", "/tts/", "/dev/")
_API_PATHS = frozenset({"/v1", "/tts", "/openapi.json"})
# Request headers the API reads: always allowed in a preflight's answer. Any other header a
# browser asks for is allowed too (an SDK's own, such as OpenAI's `X-Stainless-*`): the service
# ignores the headers it does not read, so allowing them lets a page do nothing curl could not.
REQUEST_HEADERS = (
    "Authorization",
    "Content-Type",
    "Idempotency-Key",
    "If-None-Match",
    "If-Range",
    "Last-Event-ID",
    "Range",
    "X-Client-Token",
    "xi-api-key",
)
# Response headers a page may read besides the safelisted ones (Content-Type, Content-Length,
# Cache-Control, ...): what the API's answers carry for their clients.
RESPONSE_HEADERS = (
    "Accept-Ranges",
    "Allow",
    "Content-Disposition",
    "Content-Range",
    "ETag",
    "Location",
    "Retry-After",
    "WWW-Authenticate",
    "X-Cache",
    "X-Client-Token",
    "X-Download-Path",
    "X-Job-Id",
    "X-Sample-Rate",
)
_EXPOSED = ", ".join(RESPONSE_HEADERS)
# How long a browser keeps a preflight's answer: Chromium's cap (Firefox keeps one a day). It
# guards nothing: a write from an origin no longer listed is still refused (origin.py) and its
# answer no longer readable.
MAX_AGE_S = 7200
# A header name (RFC 9110's token); a preflight asks for a few.
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}")
_REQUESTED_HEADERS_KEPT = 32


def is_api_path(path: str) -> bool:
    return path in _API_PATHS or path.startswith(_API_PREFIXES)


def allow_origin(origin: str, allowed: frozenset[str]) -> str | None:
    """The `Access-Control-Allow-Origin` for a page at `origin` (as its browser sent it): the
    origin itself when listed (its pages may send the identity cookie), `*` when any page may
    call (never with the cookie: it identifies with `X-Client-Token` or a key), None when the
    page may not."""
    if origin.strip().rstrip("/").lower() in allowed:
        return origin
    return "*" if "*" in allowed else None


def _requested_headers(request: web.Request) -> list[str]:
    names = request.headers.get("Access-Control-Request-Headers", "").split(",")
    kept = [n.strip() for n in names[:_REQUESTED_HEADERS_KEPT] if n.strip()]
    return [n for n in kept if _HEADER_NAME.fullmatch(n)]


def _route_methods(request: web.Request) -> set[str] | None:
    """The methods the path's routes take (None: no route has the path)."""
    exception = request.match_info.http_exception
    if isinstance(exception, web.HTTPMethodNotAllowed):  # what an OPTIONS on a route gets
        return set(exception.allowed_methods)
    return None


def _preflight(request: web.Request) -> web.StreamResponse | None:
    """The answer to a browser's preflight; None: not one (or a path with no route)."""
    requested = request.headers.get("Access-Control-Request-Method", "").strip()
    origin = request.headers.get("Origin")
    if not requested or origin is None or not is_api_path(request.path):
        return None
    allowed = configured_origins(request.app[SETTINGS].web.allowed_origins)
    if allow_origin(origin, allowed) is None:
        raise ApiError(
            403,
            f"pages at {origin[:100]!r} may not call this API from a browser; call it from your "
            "own server, or add the origin to CHATTTS_ALLOWED_ORIGINS",
            code="origin_not_allowed",
        )
    methods = _route_methods(request)
    if methods is None:
        return None  # answered as any request to no route is: 404
    if requested not in methods:
        allow = ",".join(sorted(methods))
        raise ApiError(
            405,
            f"{requested[:20]!r} is not allowed on {request.path[:200]!r}; use {allow}",
            code="method_not_allowed",
            headers={"Allow": allow},
        )
    headers = {name.lower(): name for name in [*_requested_headers(request), *REQUEST_HEADERS]}
    return web.Response(
        status=204,
        headers={
            "Access-Control-Allow-Methods": ", ".join(sorted(methods)),
            "Access-Control-Allow-Headers": ", ".join(headers.values()),
            "Access-Control-Max-Age": str(MAX_AGE_S),
        },
    )


# Written here rather than with a library: aiohttp-cors registers every route one by one, and its
# preflights run through the whole middleware chain (a 401 where API keys are set, a new identity
# cookie each); aiohttp-middlewares' `cors_middleware` sets its headers once the handler has
# returned, too late for the answers that stream (SSE, audio as it is made), and grants
# credentials to every allowed origin or to none. Here a preflight is answered before the key and
# identity checks, and every other answer gets its headers as it is prepared (`cors_headers`).
@web.middleware
async def cors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Preflights (OPTIONS with Access-Control-Request-Method) answered here: they carry no key
    or cookie, so they never reach the key and identity checks."""
    if request.method == "OPTIONS":
        answer = _preflight(request)
        if answer is not None:
            return answer
    return await handler(request)


async def cors_headers(request: web.Request, response: web.StreamResponse) -> None:
    """on_response_prepare: the CORS headers of an answer to a page of an allowed origin, set as
    it is prepared, so that streamed answers and errors carry them too."""
    allowed = configured_origins(request.app[SETTINGS].web.allowed_origins)
    if not allowed or not is_api_path(request.path):
        return
    vary = response.headers.get("Vary", "")
    if not {"origin", "*"} & {name.strip().lower() for name in vary.split(",")}:
        # The answer depends on the Origin: a cache must not give one origin's to another.
        response.headers["Vary"] = f"{vary}, Origin" if vary else "Origin"
    origin = request.headers.get("Origin")
    allow = None if origin is None else allow_origin(origin, allowed)
    if allow is None:
        return
    response.headers["Access-Control-Allow-Origin"] = allow
    if allow != "*":  # never with `*`: a page anywhere would act with the visitor's cookie
        response.headers["Access-Control-Allow-Credentials"] = "true"
    if request.method != "OPTIONS":
        response.headers["Access-Control-Expose-Headers"] = _EXPOSED
