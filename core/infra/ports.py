"""Whether the web port is free, asked before anything starts: a busy port is one clear line."""

from __future__ import annotations

import errno
import socket

# The exit status of `web` (and so of `run`) when its port is taken: not a crash to restart.
PORT_IN_USE_EXIT = 3


def port_taken(host: str, port: int) -> bool:
    """True when something listens on (host, port) already. Binds as the server will (with
    SO_REUSEADDR, so a port in TIME_WAIT after a restart counts as free)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host or "0.0.0.0", port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


def port_in_use_message(port: int) -> str:
    return f"port {port} is in use: set CHATTTS_PORT or --port"
