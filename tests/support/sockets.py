"""Sockets of clients that stop reading."""

from __future__ import annotations

import socket


def dead_socket(port: int, request: bytes) -> socket.socket:
    """Connect with a tiny receive buffer, send `request`, and never read."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(request)
    return sock


def ports(socks: list[socket.socket]) -> set[int]:
    return {sock.getsockname()[1] for sock in socks}
