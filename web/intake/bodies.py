"""Request bodies read as sent: refused compressed, over the size limit, or when they stop
arriving; JSON parsed."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from aiohttp import web

from web.appkeys import MEMORY, SETTINGS
from web.errors import ApiError
from web.monitors.memory import address

# A body that has not fully arrived after this long is given up (a stalled or truncated upload).
BODY_TIMEOUT_S = 30.0


async def read_body(request: web.Request) -> bytes:
    """The raw body: 415 when compressed, 413 over the limit, 408 when it stops arriving.

    The app reads bodies undecoded (`auto_decompress=False`): no client of this API compresses
    requests, and aiohttp's decoders can hang on a truncated stream or answer below our shape.
    """
    coding = request.headers.get("Content-Encoding", "identity").strip().lower()
    if coding not in ("", "identity"):
        raise ApiError(
            415,
            f"request bodies are not accepted with Content-Encoding {coding[:40]!r}; "
            "send them uncompressed",
            code="unsupported_content_encoding",
        )
    limit = request.app[SETTINGS].limits.max_body_bytes
    if request.content_length is not None and request.content_length > limit:
        raise ApiError(
            413,
            f"the request body is larger than the limit of {limit} bytes",
            code="body_too_large",
        )
    if request.content.is_eof():  # all of it came with the headers: nothing to wait for
        return await request.read()  # aiohttp enforces client_max_size while reading
    # What the body may grow to while it arrives, counted until it has (a stalled body holds it).
    size = min(request.content_length or limit, limit)
    try:
        with request.app[MEMORY].hold(address(request), size, "the request body"):
            async with asyncio.timeout(BODY_TIMEOUT_S):
                return await request.read()
    except TimeoutError:
        raise ApiError(
            408,
            f"the request body did not arrive within {BODY_TIMEOUT_S:.0f} s",
            code="body_timeout",
            headers={"Connection": "close"},
        ) from None


async def json_body(request: web.Request) -> Any:
    """The parsed JSON body: 415 for another content type, 413 over the limit, 400 if broken."""
    if request.content_type != "application/json" and not request.content_type.endswith("+json"):
        raise ApiError(
            415,
            f"send the body as JSON with 'Content-Type: application/json' "
            f"(got {request.content_type!r})",
            code="unsupported_media_type",
        )
    raw = await read_body(request)
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, f"the body is not valid JSON: {exc}", code="invalid_json") from None
