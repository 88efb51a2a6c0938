"""Standard Webhooks signatures: each client's own secret, derived from one service secret.

Signing and the header names are the spec's reference library's (`standardwebhooks`), so a
receiver verifies with it (or any port of it) unchanged. Each client (an API key, a browser's
cookie identity) gets its own secret, `GET /v1/callbacks/secret`: one client's secret lets it
forge no callback to another. Only the service secret is stored; client secrets are derived.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import UTC, datetime

from standardwebhooks import Webhook

SECRET_PREFIX = "whsec_"  # the spec's marker of a base64 signing secret


def service_secret(configured: str, cookie_secret: bytes) -> bytes:
    """CHATTTS_CALLBACK_SECRET, else one derived from the cookie secret (that every web replica
    shares already), kept apart from the cookies' own use of it."""
    if configured:
        return configured.encode()
    return hmac.new(cookie_secret, b"chattts-online callbacks", hashlib.sha256).digest()


def client_secret(service: bytes, client: str) -> str:
    """The signing secret of one client, in the spec's `whsec_<base64>` form."""
    key = hmac.new(service, client.encode(), hashlib.sha256).digest()
    return SECRET_PREFIX + base64.b64encode(key).decode()


def headers(secret: str, message_id: str, body: str, now: datetime | None = None) -> dict[str, str]:
    """The spec's three headers for one attempt: webhook-id, -timestamp and -signature."""
    timestamp = now or datetime.now(tz=UTC)
    signature = Webhook(secret).sign(message_id, timestamp, body)
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(timestamp.timestamp())),
        "webhook-signature": signature,
    }
