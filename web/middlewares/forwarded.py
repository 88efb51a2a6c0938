"""Behind a reverse proxy: the client's address and scheme from X-Forwarded-For and
X-Forwarded-Proto, believed only from the proxies CHATTTS_TRUSTED_PROXIES names."""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from core.infra.networks import Network, address_in
from web.appkeys import FORWARDED_TLS

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def forwarded_middleware(proxies: tuple[Network, ...]) -> Any:
    """The request as its client made it, when a trusted proxy relays it: `remote` is the
    right-most address the trusted proxies did not add (anything left of it the client may
    have written itself), `scheme` the proxy's last X-Forwarded-Proto. From any other peer the
    headers are ignored: a client cannot choose the address its limits count.

    Written here rather than with aiohttp-remotes: its strict mode answers 400 to requests that
    do not come through the proxy (probes, scrapes) and to clients that send their own
    X-Forwarded-For, and its filtered mode believes the headers from any peer."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if not proxies or not address_in(request.remote, proxies):
            return await handler(request)
        overrides: dict[str, str] = {}
        hops = [
            h.strip() for v in request.headers.getall("X-Forwarded-For", []) for h in v.split(",")
        ]
        for hop in reversed([h for h in hops if h]):
            try:
                overrides["remote"] = str(ipaddress.ip_address(hop))
            except ValueError:
                break  # not an address: nothing left of it can be believed
            if not address_in(hop, proxies):
                break
        proto = request.headers.get("X-Forwarded-Proto", "").rsplit(",", 1)[-1].strip().lower()
        if proto in ("http", "https"):
            overrides["scheme"] = proto
            request[FORWARDED_TLS] = proto == "https"
        return await handler(request.clone(**overrides) if overrides else request)  # type: ignore[arg-type]

    return middleware
