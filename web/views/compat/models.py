"""What OpenAI-compatible front ends probe before they speak, in the shapes they read: OpenAI's
model list and model (`GET /v1/models`, `/v1/models/{id}`), and the `{"voices": [{"id", "name"}]}`
and `{"models": [{"id"}]}` of `GET /v1/audio/voices` and `/v1/audio/models` (Open WebUI falls
back to OpenAI's six voices on any other shape). Open to callers without a key unless
`CHATTTS_DISCOVERY_NEEDS_KEY` is set (web/clients/identity.py)."""

from __future__ import annotations

from aiohttp import web

from core.queue.voices import BUILTIN_VOICES, OPENAI_VOICES
from web.appkeys import QUEUE
from web.clients.identity import client_id, is_admin
from web.errors import ApiError, json_response
from web.schemas import compat_answers as compat
from web.schemas.voices import voice_owner

# `/v1/audio/speech` takes any model name: these are the ones OpenAI clients send, all served by
# the same engines (which one serves a job is the fleet's, not the request's).
MODEL_ALIASES = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")
OWNER = "chattts-online"


async def _model_names(request: web.Request) -> list[str]:
    beats = await request.app[QUEUE].fleet.heartbeats()
    engines = sorted({str(b.get("engine", "unknown")) for b in beats})
    return [*MODEL_ALIASES, *(e for e in engines if e not in MODEL_ALIASES)]


def _model(name: str) -> compat.Model:
    return {"id": name, "object": "model", "created": 0, "owned_by": OWNER}


async def list_models(request: web.Request) -> web.Response:
    body: compat.ModelList = {
        "object": "list",
        "data": [_model(name) for name in await _model_names(request)],
    }
    return json_response(body)


async def get_model(request: web.Request) -> web.Response:
    """One model (what the OpenAI SDK's `models.retrieve` asks for); 404 in OpenAI's shape."""
    name = request.match_info["model_id"]
    if name not in await _model_names(request):
        raise ApiError(
            404,
            f"the model {name[:100]!r} does not exist; the models are listed at GET /v1/models",
            code="model_not_found",
            param="model",
            type="invalid_request_error",
        )
    return json_response(_model(name))


async def list_audio_models(request: web.Request) -> web.Response:
    body: compat.AudioModelList = {"models": [{"id": name} for name in await _model_names(request)]}
    return json_response(body)


async def list_audio_voices(request: web.Request) -> web.Response:
    """Every name a request's `voice` may be: OpenAI's, the built-in ones, the caller's own."""
    me, admin = client_id(request), is_admin(request)
    registered = await request.app[QUEUE].voices.all()
    mine = [
        name for name in sorted(registered) if admin or voice_owner(registered[name]) in (None, me)
    ]
    named = [
        *((name, f"{name} ({en}, {zh})") for name, (en, zh) in OPENAI_VOICES.items()),
        *((v.name, v.description) for v in BUILTIN_VOICES),
        *((name, name) for name in mine),
    ]
    voices = [compat.VoiceName(id=voice, name=said) for voice, said in named]
    body: compat.VoiceNames = {"voices": voices}
    return json_response(body)
