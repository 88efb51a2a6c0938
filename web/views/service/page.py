"""The demo page at `/` (templates/index.html with static/ JS and CSS)."""

from __future__ import annotations

import aiohttp_jinja2
from aiohttp import web

from core.audio.catalog import FORMATS
from core.queue.voices import BUILTIN_VOICES, DEFAULT_VOICES
from web.appkeys import SETTINGS


async def index(request: web.Request) -> web.StreamResponse:
    context = {
        "max_text_chars": request.app[SETTINGS].limits.max_text_chars,
        "max_document_chars": request.app[SETTINGS].limits.max_document_chars,
        "voices": [v.public() for v in BUILTIN_VOICES],
        "formats": list(FORMATS),
        "default_voices": DEFAULT_VOICES,
    }
    return aiohttp_jinja2.render_template("index.html", request, context)
