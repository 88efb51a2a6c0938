"""Voices registered (`POST /v1/voices`) and deleted (`DELETE /v1/voices/{name}`).

A registered voice is ChatTTS voice data shared by every worker: a speaker-embedding string sent
as JSON, or a short reference recording with its transcript sent as multipart/form-data (stored
as PCM; a worker encodes it into a ChatTTS sample prompt the first time the voice is used). Voice
data is validated without the model (web/intake/voices.py); its metadata, its data and its size
under its owner are written at once (core/queue/voices.py). A voice belongs to the client that
registered it: only it sees it listed or shown and deletes it (a job may name any voice it knows
of).
"""

from __future__ import annotations

import time

import orjson
from aiohttp import web

from core.infra.settings import Settings
from core.queue.durable import NotReplicated
from core.queue.results import Unreplicated
from core.queue.voices import BUILTIN_BY_NAME, VoiceQuotaReached
from web.appkeys import QUEUE, SETTINGS
from web.clients.identity import client_id, is_admin
from web.clients.limits import RateLimited
from web.errors import ApiError, json_response, not_found
from web.intake.voices import read_registration
from web.monitors.memory import address
from web.schemas.answers import VoiceDeleted
from web.schemas.voices import NAME, public_fields, voice_field, voice_owner


def _quotas(settings: Settings) -> tuple[tuple[int, int], ...]:
    """(most voices, most bytes) of an owner, of a source address (a fresh cookie is a fresh
    owner: the address that mints them has a quota of its own) and of the queue in all."""
    return (
        (settings.limits.voices_per_owner, settings.limits.voice_bytes_per_owner),
        (settings.limits.voices_per_address, settings.limits.voice_bytes_per_address),
        (0, settings.limits.voice_bytes_total),
    )


def _quota_error(settings: Settings, exc: VoiceQuotaReached) -> RateLimited:
    """The 429 of a registration past a quota: which, its limit, and what to do."""
    if exc.per == "queue":
        return RateLimited(
            "bytes of voice data registered on this service",
            f"{settings.limits.voice_bytes_total} bytes in all (CHATTTS_VOICE_BYTES_TOTAL)",
            60,
            "; its operators can raise it, or remove voices nobody uses",
        )
    limits, by_owner = settings.limits, exc.per == "owner"
    whom = "by this client" if by_owner else "from this address"
    if exc.kind == "count":
        most = limits.voices_per_owner if by_owner else limits.voices_per_address
        fix = "; delete one you no longer use (DELETE /v1/voices/{name})"
        return RateLimited(f"voices registered {whom}", f"{most}", 0, fix)
    most = limits.voice_bytes_per_owner if by_owner else limits.voice_bytes_per_address
    fix = "; delete a voice you no longer use"
    return RateLimited(
        f"bytes of voice data registered {whom}", f"{most} bytes ({exc.used} used)", 0, fix
    )


def source_key(request: web.Request) -> str:
    """The accounting name of a registration's source address (beside its owner's)."""
    return f"address:{address(request)}"


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
    deleted: VoiceDeleted = {"name": name, "deleted": True}
    return json_response(deleted)


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
    body = public_fields(name, record)
    return json_response(body, status=201, headers={"Location": location})
