"""Where callbacks may go: http(s) URLs of public addresses only, unless allowed by CIDR.

A job's `callback_url` makes the service send a request: without a guard it could be aimed at the
service's own network (Redis, metadata endpoints, admin ports). The URL is checked when the job
is submitted (scheme, host, literal addresses) and every address is checked again when the
connection is made (`guarded_socket`, aiohttp's socket factory), after DNS resolution: a name
that resolves, or re-resolves, to a private address is refused there.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

# What aiohttp hands its socket factory: (family, type, proto, canonname, sockaddr).
AddrInfo = tuple[int, int, int, str, tuple[Any, ...]]
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
MAX_URL_CHARS = 2048
ALLOW_SETTING = "CHATTTS_CALLBACK_ALLOW"  # named in every refusal: what lifts it


class ForbiddenAddress(OSError):
    """A callback's connection to an address it may not reach."""


def parse_allow(text: str) -> tuple[Network, ...]:
    """CHATTTS_CALLBACK_ALLOW: comma-separated CIDRs or addresses; ValueError names a bad one."""
    networks = []
    for item in (part.strip() for part in text.split(",")):
        if item:
            try:
                networks.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                raise ValueError(f"CHATTTS_CALLBACK_ALLOW: {item!r} is not a CIDR") from None
    return tuple(networks)


def refusal(address: IPAddress, allow: tuple[Network, ...]) -> str | None:
    """Why a callback may not connect to `address` (None: it may)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped  # ::ffff:127.0.0.1 is 127.0.0.1
    if any(address in network for network in allow):
        return None
    if address.is_global and not address.is_multicast:
        return None
    kind = next(
        (
            name
            for name, test in (
                ("loopback", address.is_loopback),
                ("link-local", address.is_link_local),
                ("multicast", address.is_multicast),
                ("private", address.is_private),
            )
            if test
        ),
        "non-public",
    )
    return f"{address} is a {kind} address (allow it with {ALLOW_SETTING})"


def check_url(url: object, allow: tuple[Network, ...]) -> str:
    """A callback URL as submitted, or ValueError saying what to fix."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL_CHARS:
        raise ValueError(
            f"'callback_url' must be an http or https URL of 1 to {MAX_URL_CHARS} chars"
        )
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ValueError("'callback_url' is not a valid URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("'callback_url' must be an absolute http:// or https:// URL")
    if port == 0:
        raise ValueError("'callback_url' names port 0")
    try:
        literal = ipaddress.ip_address(parts.hostname)
    except ValueError:
        return url  # a name: its addresses are checked when the callback connects
    reason = refusal(literal, allow)
    if reason:
        raise ValueError(f"'callback_url' may not point at {reason}")
    return url


def guarded_socket(allow: tuple[Network, ...]) -> Callable[[AddrInfo], socket.socket]:
    """aiohttp's socket factory: the last word, on the very address about to be connected."""

    def create(addr_info: AddrInfo) -> socket.socket:
        family, kind, proto, _, sockaddr = addr_info
        reason = refusal(ipaddress.ip_address(sockaddr[0]), allow)
        if reason:
            raise ForbiddenAddress(reason)
        return socket.socket(family=family, type=kind, proto=proto)

    return create
