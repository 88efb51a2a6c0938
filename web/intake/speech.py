"""OpenAI's speech body through the door, for the protocols that take it (OpenAI's speech,
Kokoro's captioned speech): an interactive job, refused in OpenAI's terms, its answer waited on."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from web.appkeys import SETTINGS
from web.intake.door import Admitted, Policy, admit, who
from web.schemas import openai


@contextlib.asynccontextmanager
async def admit_speech(
    request: web.Request, payload: Any
) -> AsyncIterator[tuple[openai.Speech, Admitted]]:
    """OpenAI's body -> our job, admitted (400 with OpenAI's error shape for anything wrong),
    the connection's lease held while the block runs."""
    read = openai.speech_job(payload)
    limit = min(openai.MAX_INPUT_CHARS, request.app[SETTINGS].limits.max_text_chars)
    policy = Policy(max_chars=limit, hold=True, priority="high", in_own_terms=openai.as_openai)
    async with admit(request.app, who(request), read.job, policy) as admitted:
        job = admitted.request
        yield (
            openai.Speech(
                job, read.format, read.stream, len(job.text), read.gain, read.download_link
            ),
            admitted,
        )
