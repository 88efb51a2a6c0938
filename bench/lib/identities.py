"""Identities of simulated users: identity cookies signed with the secret the benchmarks give
their web tier (stdlib only: the SSE client processes import nothing else), as
web.clients.identity signs them."""

from __future__ import annotations

import base64
import hashlib
import hmac

COOKIE_SECRET = "chattts-bench-cookie-secret"


def cookie_value(token: str) -> str:
    """The `tts_client` cookie of `token` (16-64 url-safe characters), as `identity.signed`."""
    mac = hmac.new(COOKIE_SECRET.encode(), token.encode(), hashlib.sha256).digest()[:16]
    return f"{token}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"


def client_id(token: str) -> str:
    """The server's id of the client whose cookie is `cookie_value(token)`, as
    `identity.cookie_client` derives it (never the cookie itself)."""
    message = b"cookie-client." + cookie_value(token).encode()
    return "c-" + hmac.new(COOKIE_SECRET.encode(), message, hashlib.sha256).hexdigest()[:32]


def cookie_header(token: str) -> dict[str, str]:
    return {"Cookie": f"tts_client={cookie_value(token)}"}
