"""Where callbacks may go: http(s) URLs of public addresses only, unless allowed by CIDR.

A job's `callback_url` makes the service send a request: without a guard it could be aimed at the
service's own network (Redis, metadata endpoints, admin ports). The URL is checked when the job
is submitted (scheme, host, literal addresses) and every address is checked again when the
connection is made (`guarded_socket`, aiohttp's socket factory), after DNS resolution: a name
that resolves, or re-resolves, to a private address is refused there.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from core.infra.networks import Network

# What aiohttp hands its socket factory: (family, type, proto, canonname, sockaddr).
AddrInfo = tuple[int, int, int, str, tuple[Any, ...]]
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
MAX_URL_CHARS = 2048
ALLOW_SETTING = "CHATTTS_CALLBACK_ALLOW"  # named in every refusal: what lifts it


log = logging.getLogger("chattts_online.callbacks")


class ForbiddenAddress(OSError):
    """A callback's connection to an address it may not reach."""


# IPv6 forms that carry an IPv4 address a gateway may translate to: NAT64's well-known and
# local-use prefixes (RFC 6052, 8215), and the deprecated IPv4-compatible ::a.b.c.d.
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address inside an IPv6 one that reaches it (mapped, 6to4, Teredo's client,
    NAT64, IPv4-compatible), or None."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    low32 = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if any(address in network for network in _NAT64):
        return low32
    if int(address) >> 32 == 0 and int(address) > 1:  # ::a.b.c.d (not :: or ::1)
        return low32
    return None


def refusal(address: IPAddress, allow: tuple[Network, ...]) -> str | None:
    """Why a callback may not connect to `address` ("a loopback address ..."; None: it may)."""
    if any(address in network for network in allow):
        return None
    kind = _non_public(address, allow)
    return f"{kind} (allow it with {ALLOW_SETTING})" if kind else None


def _non_public(address: IPAddress, allow: tuple[Network, ...]) -> str | None:
    if isinstance(address, ipaddress.IPv6Address):
        inner = _embedded_ipv4(address)
        if inner is not None:  # judged by what it reaches: ::ffff:127.0.0.1 is 127.0.0.1
            if any(inner in network for network in allow):
                return None
            kind = _non_public(inner, allow)
            return f"{kind} ({inner}, inside it)" if kind else None
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
    return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind} address"


def _inet_aton(host: str) -> bool:
    """Whether the C library reads `host` as an IPv4 address (it takes octal, hex and fewer
    than four parts), as a resolver would."""
    try:
        socket.inet_aton(host)
    except OSError:
        return False
    return True


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
        if _inet_aton(parts.hostname):  # "0x7f.1", "2130706433": resolvers read an address
            raise ValueError(
                "'callback_url' names an IPv4 address in a shorthand form: write it as four "
                "decimal numbers (a.b.c.d)"
            ) from None
        return url  # a name: its addresses are checked when the callback connects
    reason = refusal(literal, allow)
    if reason:
        raise ValueError(f"'callback_url' may not point at {literal}: it is {reason}")
    return url


def guarded_socket(allow: tuple[Network, ...]) -> Callable[[AddrInfo], socket.socket]:
    """aiohttp's socket factory: the last word, on the very address about to be connected."""

    def create(addr_info: AddrInfo) -> socket.socket:
        family, kind, proto, _, sockaddr = addr_info
        reason = refusal(ipaddress.ip_address(sockaddr[0]), allow)
        if reason:
            # What a name resolved to stays here (logged), never in what the submitter reads.
            log.info("a callback's connection to %s refused: %s", sockaddr[0], reason)
            raise ForbiddenAddress(f"its host resolves to {reason}")
        return socket.socket(family=family, type=kind, proto=proto)

    return create
