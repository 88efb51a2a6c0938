"""What the door (web/intake/door.py) checks a submission with besides its schema: its text
cleaned off the event loop when long, its voice known to this client."""

from __future__ import annotations

import asyncio

from core.queue.store import Queue
from core.queue.voice_names import is_derived
from core.queue.voices import BUILTIN_BY_NAME
from core.text.sentences import clean_text
from web.errors import ApiError
from web.schemas.voices import voice_owner

# Cleaning this many characters takes well under a millisecond; longer text is cleaned off-loop.
_CLEAN_ON_LOOP = 20_000


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
