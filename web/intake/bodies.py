"""Request bodies read as sent, through one counted, timed reader: refused compressed, over the
route's size limit, or when they stop arriving; JSON and forms parsed from what was read."""

from __future__ import annotations

import asyncio
import codecs
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

import orjson
from aiohttp import BodyPartReader, MultipartReader, StreamReader, web
from aiohttp.base_protocol import BaseProtocol

from web.appkeys import MEMORY, SETTINGS
from web.errors import ApiError
from web.listener import BODY_TIMEOUT_S
from web.monitors.memory import address

FORM = "application/x-www-form-urlencoded"
MULTIPART = "multipart/form-data"


async def read_body(request: web.Request, limit: int | None = None) -> bytes:
    """The raw body: 415 when compressed, 413 over `limit` (the app's body limit by default),
    408 when it stops arriving. Held in the memory budget at its full size while it arrives.

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
    limit = limit or request.app[SETTINGS].limits.max_body_bytes
    if request.content_length is not None and request.content_length > limit:
        raise _too_large(limit)
    if request.content.is_eof():  # all of it came with the headers: nothing to wait for
        return await _read_within(request, limit)
    # What the body may grow to while it arrives, counted until it has (a stalled body holds it).
    size = min(request.content_length or limit, limit)
    try:
        with request.app[MEMORY].hold(address(request), size, "the request body"):
            async with asyncio.timeout(BODY_TIMEOUT_S):
                return await _read_within(request, limit)
    except TimeoutError:
        raise ApiError(
            408,
            f"the request body did not arrive within {BODY_TIMEOUT_S:.0f} s",
            code="body_timeout",
            headers={"Connection": "close"},
        ) from None


async def _read_within(request: web.Request, limit: int) -> bytes:
    """The body, read in chunks and refused as soon as it passes `limit` (a chunked body
    declares no length)."""
    data = bytearray()
    while chunk := await request.content.readany():
        data += chunk
        if len(data) > limit:
            raise _too_large(limit)
    return bytes(data)


def _too_large(limit: int) -> ApiError:
    """413, and the connection closed: the rest of the body is not worth reading."""
    return ApiError(
        413,
        f"the request body is larger than the limit of {limit} bytes",
        code="body_too_large",
        headers={"Connection": "close"},
    )


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


@dataclass(frozen=True)
class Part:
    """One field of a multipart form, read whole."""

    name: str
    data: bytes
    charset: str
    filename: str | None

    def text(self) -> str:
        return decoded(self.data, self.charset, f"field {self.name!r}")


def decoded(data: bytes, charset: str | None, what: str) -> str:
    """A form's bytes as text in their charset (UTF-8 when it names none Python knows); 422
    naming `what` when they are not text in it (a GBK form sent as UTF-8 is never garbled)."""
    name = charset or "utf-8"
    try:
        codecs.lookup(name)
    except LookupError:
        name = "utf-8"
    try:
        return data.decode(name)
    except UnicodeDecodeError:
        raise ApiError(
            422,
            f"{what} is not {name} text: send UTF-8, or name the charset it is written in "
            "(for example 'Content-Type: application/x-www-form-urlencoded; charset=gbk')",
            code="invalid_encoding",
        ) from None


async def form_parts(request: web.Request, limit: int, max_parts: int) -> AsyncIterator[Part]:
    """A multipart form's fields, parsed from its body once the one reader has read it: 400 when
    it does not follow its boundary, 422 past `max_parts` fields (counted before any is kept)."""
    raw = await read_body(request, limit)
    # Parsed by aiohttp's own reader, over the bytes in hand (a limit above them: no flow
    # control to apply to a connection that has already been read).
    stream = StreamReader(BaseProtocol(asyncio.get_running_loop()), max(2**16, len(raw) + 1))
    stream.feed_data(raw)
    stream.feed_eof()
    parts = 0
    try:
        reader = MultipartReader(request.headers, stream)
        while (part := await reader.next()) is not None:
            parts += 1
            if parts > max_parts:
                raise ApiError(
                    422, f"a form of more than {max_parts} fields", code="too_many_fields"
                )
            if not isinstance(part, BodyPartReader):
                raise ApiError(422, "nested multipart bodies are not accepted", code="invalid_body")
            data = await part.read()
            yield Part(part.name or "", bytes(data), part.get_charset("utf-8"), part.filename)
    except (ValueError, AssertionError) as exc:  # no boundary, a body that does not follow it
        message = f"the form-data body could not be read: {exc}"
        raise ApiError(400, message, code="invalid_multipart") from None


async def form_fields(request: web.Request, limit: int, max_fields: int) -> dict[str, str]:
    """The text fields of a form, urlencoded or multipart (files are left out), read through the
    one reader and counted before they are parsed: a body of a million empty fields costs a
    count of its separators, not a parse."""
    if request.content_type == FORM:
        raw = await read_body(request, limit)
        try:  # byte for byte (Latin-1), so that each field is decoded in the form's charset
            pairs = parse_qsl(
                raw.decode("latin-1"),
                keep_blank_values=True,
                max_num_fields=max_fields,
                encoding="latin-1",
            )
        except ValueError:
            raise ApiError(
                422, f"a form of more than {max_fields} fields", code="too_many_fields"
            ) from None
        charset = request.charset
        return {
            decoded(name.encode("latin-1"), charset, "a field's name"): decoded(
                value.encode("latin-1"), charset, f"field {name!r}"
            )
            for name, value in pairs
        }
    fields: dict[str, str] = {}
    async for part in form_parts(request, limit, max_fields):
        if part.filename is None:  # a file is not a field (it counted, and is left unread)
            fields[part.name] = part.text()
    return fields
