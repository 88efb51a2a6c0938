"""Cross-site and DNS-rebinding guards: which Origins may change state, which Hosts are served.

A browser sends `Origin` with every cross-origin POST and DELETE, and a web page can post a form
(multipart, urlencoded, text/plain) to any address without asking first. So a state-changing
request whose Origin is neither this server's own nor configured (`CHATTTS_ALLOWED_ORIGINS`) is
refused with 403: no page elsewhere can submit jobs, register or delete voices, or cancel jobs
through a visitor's browser. Requests with no Origin are not from a page (curl, SDKs) and pass.

A page can also make its own name resolve to 127.0.0.1 (DNS rebinding) and then read a service
on loopback as "same origin". A server bound to loopback therefore answers only Host names that
mean loopback, unless `CHATTTS_ALLOWED_HOSTS` names others (or `*`); one bound to a public
address serves any Host unless the setting narrows it.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache

from aiohttp import web
from aiohttp.typedefs import Handler

from core.infra.settings import Settings
from web.appkeys import SETTINGS
from web.errors import ApiError

UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def _names(csv: str) -> frozenset[str]:
    return frozenset(o.strip().rstrip("/").lower() for o in csv.split(",") if o.strip())


@lru_cache(maxsize=8)
def configured_origins(csv: str) -> frozenset[str]:
    """CHATTTS_ALLOWED_ORIGINS as a set: lower case, no trailing slash (`*`: any page)."""
    return _names(csv)


def check_websocket_origin(request: web.Request) -> None:
    """A WebSocket upgrade from a page of another origin is refused (403): browsers send no
    preflight for one, and the socket would act with the page's cookie."""
    if not origin_allowed(request):
        raise ApiError(
            403,
            f"WebSocket connections from origin {request.headers.get('Origin')!r} are not "
            "allowed; add it to CHATTTS_ALLOWED_ORIGINS",
            code="origin_not_allowed",
        )


def origin_allowed(request: web.Request) -> bool:
    """No Origin (not a browser), the page's own host, or a configured origin."""
    origin = request.headers.get("Origin")
    if origin is None:
        return True
    origin = origin.strip().rstrip("/").lower()
    allowed = configured_origins(request.app[SETTINGS].web.allowed_origins)
    if "*" in allowed or origin in allowed:
        return True
    _, sep, authority = origin.partition("://")
    return bool(sep) and authority == request.host.lower()


@lru_cache(maxsize=256)  # every request's Host; a client sends the same few
def is_loopback_name(host: str) -> bool:
    """localhost, *.localhost, 127.0.0.0/8 or ::1 (a Host header's name, port stripped)."""
    host = host.strip("[]").lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_name(host: str) -> str:
    if host.startswith("["):  # [::1]:8000
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


@lru_cache(maxsize=8)
def _host_policy(bind: str, csv: str) -> tuple[bool, frozenset[str]]:
    """(loopback names only, extra names allowed) for a server bound to `bind`."""
    names = _names(csv)
    if "*" in names:
        return False, frozenset()
    return (not names and is_loopback_name(bind)), names


def host_allowed(host: str, settings: Settings) -> bool:
    loopback_only, names = _host_policy(settings.web.host, settings.web.allowed_hosts)
    name = _host_name(host.strip().lower())
    if names:
        return name in names or is_loopback_name(name)
    return not loopback_only or is_loopback_name(name)


# Probes and scrapes address a process by its IP (Prometheus' service discovery, the kubelet):
# they are answered for any Host. What they tell is the service's health and figures, not a
# client's data, and CHATTTS_PRIVATE_METRICS puts two of them behind the keys.
_ANY_HOST = frozenset({"/healthz", "/readyz", "/metrics"})


@web.middleware
async def origin_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    settings = request.app[SETTINGS]
    if request.path not in _ANY_HOST and not host_allowed(request.host, settings):
        raise ApiError(
            421,
            f"this server does not answer for host {request.host[:100]!r}; add it to "
            "CHATTTS_ALLOWED_HOSTS",
            code="host_not_allowed",
        )
    if request.method in UNSAFE_METHODS and not origin_allowed(request):
        origin = request.headers.get("Origin", "")[:100]
        raise ApiError(
            403,
            f"requests that change state are not accepted from the page at {origin!r} (another "
            "site); call the API from your own server, or add the origin to "
            "CHATTTS_ALLOWED_ORIGINS",
            code="origin_not_allowed",
        )
    return await handler(request)
