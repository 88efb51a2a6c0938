"""Voices listed (`GET /v1/voices`: the live engines', the built-in and this client's registered
ones; `GET /v2/voices`: searched and paged, as ElevenLabs' `voices.search()` reads them) and
shown one at a time (`GET /v1/voices/{name}`); a registered voice only to its owner."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from aiohttp import web

from core.queue.voices import BUILTIN_BY_NAME, BUILTIN_VOICES, DEFAULT_VOICE, DEFAULT_VOICES
from web.appkeys import QUEUE
from web.clients.identity import client_id, is_admin
from web.errors import ApiError, json_response, not_found
from web.monitors.fleet import capabilities_of
from web.schemas.answers import Engine, Voice, VoiceList, VoicePage
from web.schemas.voices import NAME, public_fields, voice_owner


def _shown(voice: Mapping[str, Any]) -> Voice:
    """A voice with the fields ElevenLabs' SDKs and LiveKit's plugin read besides ours:
    `voice_id` (its name), `category` (`premade`: built in; `cloned`: registered) and `labels`
    (its language and gender)."""
    labels = {key: str(voice[key]) for key in ("language", "gender") if voice.get(key)}
    category = "cloned" if voice.get("builtin") is False else "premade"
    return cast(Voice, {**voice, "voice_id": voice["name"], "category": category, "labels": labels})


def _listed(voice: Mapping[str, Any], engines: list[str]) -> Voice:
    """A voice as the listing shows it (a heartbeat's, a built-in's, a registered one's), with
    the live engines that speak it."""
    return cast(Voice, {**_shown(voice), "engines": engines})


async def list_voices(request: web.Request) -> web.Response:
    return json_response(await _listing(request))


async def search_voices(request: web.Request) -> web.Response:
    """`GET /v2/voices?search=&category=&page_size=&next_page_token=`: ElevenLabs' search, over
    a voice's name, description and labels; a page of at most 100."""
    query = request.query
    search = query.get("search", "").strip().lower()
    category = query.get("category") or query.get("voice_type")
    size, start = _whole(query, "page_size", 10, 1, 100), _whole(query, "next_page_token", 0, 0)
    found = [
        voice
        for voice in (await _listing(request))["voices"]
        if (not category or voice.get("category") == category)
        and search
        in " ".join([voice["name"], str(voice.get("description") or "")]).lower()
        + " ".join(voice.get("labels", {}).values()).lower()
    ]
    page: VoicePage = {
        "voices": found[start : start + size],
        "has_more": start + size < len(found),
        "total_count": len(found),
        "next_page_token": str(start + size) if start + size < len(found) else None,
    }
    return json_response(page)


def _whole(
    query: Mapping[str, str], name: str, default: int, least: int, most: int = 1 << 30
) -> int:
    value = query.get(name)
    if value is None:
        return default
    if not (value.isascii() and value.isdigit()) or not least <= int(value) <= most:
        raise ApiError(
            400,
            f"{name!r} must be a whole number from {least} to {most}",
            code="invalid_value",
            param=name,
        )
    return int(value)


async def _listing(request: web.Request) -> VoiceList:
    queue = request.app[QUEUE]
    beats = await queue.fleet.heartbeats()  # the workers alive now
    registered = await queue.voices.all()
    voices: dict[str, Voice] = {}
    engines: dict[tuple[str, str], Engine] = {}
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
            entry = voices.setdefault(voice["name"], _listed(voice, []))
            if engine not in entry["engines"]:
                entry["engines"].append(engine)
    if not engines:  # no worker alive: what every engine will speak
        voices = {v.name: _listed(v.public(), []) for v in BUILTIN_VOICES}
    me, admin = client_id(request), is_admin(request)
    # A registered voice is speaker data: the engines that speak registered voices speak it.
    for name, raw in sorted(registered.items()):
        owner = voice_owner(raw)
        if owner is not None and owner != me and not admin:
            continue  # another client's voice: theirs to list
        voices.setdefault(name, _listed(public_fields(name, raw), sorted(speakers)))
    listing: VoiceList = {
        "voices": list(voices.values()),
        "default": DEFAULT_VOICE,  # for Mandarin text; any other gets the English one
        "default_by_language": DEFAULT_VOICES,
        "engines": list(engines.values()),
        "workers": len(beats),
    }
    return listing


async def get_voice(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    builtin = BUILTIN_BY_NAME.get(name)
    if builtin is not None:
        return json_response(_shown(builtin.public()))
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
    return json_response(_shown(public_fields(name, raw)))
