"""Voices listed (`GET /v1/voices`: the live engines', the built-in and this client's registered
ones) and shown one at a time (`GET /v1/voices/{name}`); a registered voice only to its owner."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from aiohttp import web

from core.queue.voices import BUILTIN_BY_NAME, BUILTIN_VOICES, DEFAULT_VOICE, DEFAULT_VOICES
from web.appkeys import QUEUE
from web.clients.identity import client_id, is_admin
from web.errors import json_response, not_found
from web.monitors.fleet import capabilities_of
from web.schemas.answers import Engine, Voice, VoiceList
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
    return json_response(listing)


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
