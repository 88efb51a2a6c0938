"""Submissions admitted: text cleaned off the event loop when long, the request validated
(web/schemas), then its voice checked against the queue (known to this client, speakable by a
live engine)."""

from __future__ import annotations

import asyncio
from typing import Any

from core.queue.job import SynthesisRequest
from core.queue.store import Queue
from core.queue.voice_names import is_derived
from core.queue.voices import BUILTIN_BY_NAME
from core.text.sentences import clean_text
from web.errors import ApiError
from web.monitors.fleet import check_speakable, check_voice_speakable
from web.schemas.jobs import check_length, synthesis
from web.schemas.voices import voice_owner

# Cleaning this many characters takes well under a millisecond; longer text is cleaned off-loop.
_CLEAN_ON_LOOP = 20_000


async def synthesis_request(
    queue: Queue,
    payload: Any,
    max_chars: int,
    document_chars: int | None = None,
    client: str | None = None,
    **fixed: Any,
) -> SynthesisRequest:
    """Validate a submission: cleaned text of 1..max_chars with known control tokens only, a
    sentence prompt of known tokens (with `refine`), known voice and format, no extras."""
    if not isinstance(payload, dict):
        raise ApiError(422, "the body must be a JSON object", code="invalid_body")
    payload = {**payload, **fixed}
    text = payload.get("text")
    if isinstance(text, str):
        check_length(text, max_chars, document_chars)  # as sent: never cleaned past the limit
        payload["text"] = await clean(text)
    request = synthesis(payload, max_chars, document_chars)
    await check_voice(queue, request.voice, client)
    await check_voice_speakable(queue, request.voice)
    await check_speakable(queue, request.text, request.voice, request.normalize)
    return request


async def clean(text: str) -> str:
    """clean_text, off the event loop when the text is long (bodies may hold megabytes)."""
    if len(text) > _CLEAN_ON_LOOP:
        return await asyncio.to_thread(clean_text, text)
    return clean_text(text)


async def check_voice(queue: Queue, voice: str, client: str | None = None) -> None:
    """A built-in voice, or one registered by `client` (or by nobody in particular: voices
    from before owners); 422 naming the voices this client may use. Another client's voice is
    unknown here: its name says nothing of whether it exists."""
    if is_derived(voice):
        return
    raw = await queue.voices.metadata(voice)
    if raw is not None and (client is None or voice_owner(raw) in (None, client)):
        return
    mine = sorted(await queue.voices.owned(client)) if client is not None else []
    raise ApiError(
        422,
        f"unknown voice {voice!r}; the voices are {', '.join([*BUILTIN_BY_NAME, *mine])} "
        "(GET /v1/voices), a seed such as 'seed_2222', or a blend such as "
        "'en_female(2)+seed_2222(1)'",
        code="unknown_voice",
        param="voice",
    )
