"""What OpenAI-compatible front ends probe before they speak: `GET /v1/models` (OpenAI's list
shape) and `GET /v1/audio/voices` (Kokoro-FastAPI's: the names a `voice` may be)."""

from __future__ import annotations

from aiohttp import web

from core.queue.voices import BUILTIN_VOICES, OPENAI_VOICES
from web.appkeys import QUEUE
from web.clients.identity import client_id, is_admin
from web.errors import json_response
from web.schemas.voices import voice_owner

# `/v1/audio/speech` takes any model name: these are the ones OpenAI clients send, all served by
# the same engines (which one serves a job is the fleet's, not the request's).
MODEL_ALIASES = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")
OWNER = "chattts-online"


async def list_models(request: web.Request) -> web.Response:
    beats = await request.app[QUEUE].fleet.heartbeats()
    engines = sorted({str(b.get("engine", "unknown")) for b in beats})
    names = [*MODEL_ALIASES, *(e for e in engines if e not in MODEL_ALIASES)]
    data = [{"id": name, "object": "model", "created": 0, "owned_by": OWNER} for name in names]
    return json_response({"object": "list", "data": data})


async def list_audio_voices(request: web.Request) -> web.Response:
    """Every name a request's `voice` may be: OpenAI's, the built-in ones, the caller's own."""
    me, admin = client_id(request), is_admin(request)
    registered = await request.app[QUEUE].voices.all()
    mine = [
        name for name, raw in sorted(registered.items()) if admin or voice_owner(raw) in (None, me)
    ]
    return json_response({"voices": [*OPENAI_VOICES, *(v.name for v in BUILTIN_VOICES), *mine]})
