"""`GET /v1/callbacks/secret`: the caller's own secret for verifying the callbacks of its jobs."""

from __future__ import annotations

from aiohttp import web

from web.appkeys import CALLBACK_SECRET
from web.callbacks.signing import client_secret
from web.clients.identity import client_id
from web.errors import json_response
from web.schemas.answers import CallbackSecret


async def callback_secret(request: web.Request) -> web.Response:
    """Derived for this client (its API key, or its browser's identity): the same on every
    replica and every call, and no use for verifying another client's callbacks."""
    secret = client_secret(request.app[CALLBACK_SECRET], client_id(request))
    body: CallbackSecret = {
        "secret": secret,
        "scheme": "Standard Webhooks (https://www.standardwebhooks.com): verify with "
        "standardwebhooks.Webhook(secret).verify(body, headers)",
    }
    return json_response(body, headers={"Cache-Control": "no-store"})
