"""Voices: list them (`GET /v1/voices`), register (`POST`), show and delete (`/v1/voices/{name}`).

A registered voice is ChatTTS voice data shared by every worker: a speaker-embedding string sent
as JSON, or a short reference recording with its transcript sent as multipart/form-data (stored
as PCM; a worker encodes it into a ChatTTS sample prompt the first time the voice is used). Voice
data is validated here without the model (web/intake/voices.py); its metadata, its data and its size
under its owner are written at once (core/queue/voices.py). A voice belongs to the client that
registered it: only it sees it listed or shown and deletes it (a job may name any voice it knows
of).
"""

from __future__ import annotations

import time
from typing import Any

import orjson
from aiohttp import web

from core.infra.settings import Settings
from core.queue.durable import NotReplicated
from core.queue.store import Unreplicated
from core.queue.voices import (
    BUILTIN_BY_NAME,
    BUILTIN_VOICES,
    DEFAULT_VOICE,
    DEFAULT_VOICES,
    VoiceQuotaReached,
)
from web.appkeys import QUEUE, SETTINGS
from web.clients.identity import client_id, is_admin
from web.clients.limits import RateLimited
from web.errors import ApiError, json_response, not_found
from web.intake.voices import read_registration
from web.monitors.fleet import capabilities_of
from web.monitors.memory import address
from web.schemas.voices import NAME, voice_field, voice_owner

# Registered voices carry large fields (speaker embeddings, reference clips): only short scalar
# fields are listed, and never the voice data itself.
_MAX_FIELD_CHARS = 256
_PRIVATE_FIELDS = frozenset({"embedding", "owner", "source"})


def _quotas(settings: Settings) -> tuple[tuple[int, int], ...]:
    """(most voices, most bytes) of an owner, of a source address (a fresh cookie is a fresh
    owner: the address that mints them has a quota of its own) and of the queue in all."""
    return (
        (settings.voices_per_owner, settings.voice_bytes_per_owner),
        (settings.voices_per_address, settings.voice_bytes_per_address),
        (0, settings.voice_bytes_total),
    )


def _quota_error(settings: Settings, exc: VoiceQuotaReached) -> RateLimited:
    """The 429 of a registration past a quota: which, its limit, and what to do."""
    if exc.per == "queue":
        return RateLimited(
            "bytes of voice data registered on this service",
            f"{settings.voice_bytes_total} bytes in all (CHATTTS_VOICE_BYTES_TOTAL)",
            60,
            "; its operators can raise it, or remove voices nobody uses",
        )
    whom = "by this client" if exc.per == "owner" else "from this address"
    if exc.kind == "count":
        most = settings.voices_per_owner if exc.per == "owner" else settings.voices_per_address
        fix = "; delete one you no longer use (DELETE /v1/voices/{name})"
        return RateLimited(f"voices registered {whom}", f"{most}", 0, fix)
    most = (
        settings.voice_bytes_per_owner if exc.per == "owner" else settings.voice_bytes_per_address
    )
    fix = "; delete a voice you no longer use"
    return RateLimited(
        f"bytes of voice data registered {whom}", f"{most} bytes ({exc.used} used)", 0, fix
    )


def source_key(request: web.Request) -> str:
    """The accounting name of a registration's source address (beside its owner's)."""
    return f"address:{address(request)}"


def _public_registered(name: str, raw: bytes) -> dict[str, Any]:
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        data = {}
    fields = {
        k: v
        for k, v in (data.items() if isinstance(data, dict) else ())
        if k not in _PRIVATE_FIELDS
        and (
            v is None
            or isinstance(v, bool | int | float)
            or (isinstance(v, str) and len(v) <= _MAX_FIELD_CHARS)
        )
    }
    return {**fields, "name": name, "builtin": False}


async def list_voices(request: web.Request) -> web.Response:
    queue = request.app[QUEUE]
    beats = await queue.fleet.heartbeats()  # the workers alive now
    registered = await queue.voices.all()
    voices: dict[str, dict[str, Any]] = {}
    engines: dict[tuple[str, str], dict[str, Any]] = {}
    speakers: set[str] = set()  # engines that speak registered voices
    for beat in beats:
        engine = str(beat.get("engine", "unknown"))
        version = str(beat.get("model_version", ""))
        info = engines.setdefault(
            (engine, version),
            {
                "name": engine,
                "model_version": version,
                "sample_rate": beat.get("sample_rate"),
                "capabilities": capabilities_of(beat),
                "workers": 0,
            },
        )
        if info["capabilities"].get("registered_voices") is True:
            speakers.add(engine)
        info["workers"] += 1
        for voice in beat.get("voices") or []:
            if not isinstance(voice, dict) or "name" not in voice:
                continue
            entry = voices.setdefault(voice["name"], {**voice, "engines": []})
            if engine not in entry["engines"]:
                entry["engines"].append(engine)
    if not engines:  # no worker alive: what every engine will speak
        voices = {v.name: {**v.public(), "engines": []} for v in BUILTIN_VOICES}
    me, admin = client_id(request), is_admin(request)
    # A registered voice is speaker data: the engines that speak registered voices speak it.
    for name, raw in sorted(registered.items()):
        owner = voice_owner(raw)
        if owner is not None and owner != me and not admin:
            continue  # another client's voice: theirs to list
        voices.setdefault(name, {**_public_registered(name, raw), "engines": sorted(speakers)})
    return json_response(
        {
            "voices": list(voices.values()),
            "default": DEFAULT_VOICE,  # for Mandarin text; any other gets the English one
            "default_by_language": DEFAULT_VOICES,
            "engines": list(engines.values()),
            "workers": len(beats),
        }
    )


# -- one voice ----------------------------------------------------------------------------------


async def get_voice(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    builtin = BUILTIN_BY_NAME.get(name)
    if builtin is not None:
        return json_response(builtin.public())
    queue = request.app[QUEUE]
    raw: bytes | None = None
    if NAME.fullmatch(name):
        raw = await queue.voices.metadata(name)
    owner = voice_owner(raw) if raw is not None else None
    if owner is not None and owner != client_id(request) and not is_admin(request):
        raw = None  # another client's voice: theirs to show, as theirs to list
    if raw is None:
        message = f"no voice named {name[:64]!r} (GET /v1/voices lists them)"
        raise not_found(message, "voice_not_found")
    return json_response(_public_registered(name, raw))


async def delete_voice(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    if name in BUILTIN_BY_NAME:
        raise ApiError(
            409, f"{name!r} is a built-in voice; it cannot be deleted", code="voice_builtin"
        )
    queue = request.app[QUEUE]
    raw = await queue.voices.metadata(name) if NAME.fullmatch(name) else None
    if raw is None:
        raise not_found(f"no registered voice named {name[:64]!r}", "voice_not_found")
    owner = voice_owner(raw)
    if owner is not None and owner != client_id(request) and not is_admin(request):
        raise ApiError(
            403,
            f"the voice {name!r} was registered by another client; only the client that "
            "registered it (the same API key, or the same browser's cookie) may delete it",
            code="not_voice_owner",
        )
    if not await queue.voices.delete(name, owner, voice_field(raw, "source")):
        raise not_found(f"no registered voice named {name[:64]!r}", "voice_not_found")
    return json_response({"name": name, "deleted": True})


async def register_voice(request: web.Request) -> web.Response:
    """201 with the voice (without its data): JSON with `embedding`, or a recording as a form."""
    fields = await read_registration(request)
    name = fields.pop("name")
    data: str = fields.pop("embedding")
    owner = client_id(request)
    meta = {
        **fields,
        "name": name,
        "created_at": time.time(),
        "builtin": False,
        "owner": owner,
        "source": source_key(request),
    }
    record = orjson.dumps(meta)
    queue = request.app[QUEUE]
    settings = request.app[SETTINGS]
    try:
        registered = await queue.voices.register(
            name, owner, record, data, meta["source"], _quotas(settings)
        )
    except VoiceQuotaReached as exc:
        raise _quota_error(settings, exc) from None
    except NotReplicated as exc:
        raise ApiError(
            503,
            f"the voice {name!r} reached Redis's primary, but {exc}. Check GET /v1/voices/{name} "
            "before registering it again",
            code=Unreplicated.code,
        ) from None
    if not registered:
        raise ApiError(
            409,
            f"a voice named {name!r} is already registered; delete it first "
            f"(DELETE /v1/voices/{name}) or choose another name",
            code="voice_exists",
        )
    location = str(request.app.router["voice"].url_for(name=name))
    body = _public_registered(name, record)
    return json_response(body, status=201, headers={"Location": location})
