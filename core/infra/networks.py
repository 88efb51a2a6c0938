"""Addresses and the lists of networks settings name (CIDRs): parsed once, matched per request."""

from __future__ import annotations

import ipaddress

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(text: str, setting: str) -> tuple[Network, ...]:
    """A setting's comma-separated CIDRs or addresses; ValueError names the bad one."""
    networks = []
    for item in (part.strip() for part in text.split(",")):
        if item:
            try:
                networks.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                raise ValueError(f"{setting}: {item!r} is not a CIDR") from None
    return tuple(networks)


def address_in(address: str | None, networks: tuple[Network, ...]) -> bool:
    """Whether `address` (an IPv4-mapped IPv6 one as its IPv4) lies in one of `networks`; an
    address that does not parse lies in none."""
    try:
        ip = ipaddress.ip_address(address or "")
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in network for network in networks)
