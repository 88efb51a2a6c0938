"""`GET /v1/voices`: the voices live workers speak, plus registered voices.

Registering and deleting voices (`POST`/`DELETE /v1/voices`) arrive with the ChatTTS engine; they
belong in this module, next to the listing, and write the `keys.voices` hash read here.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from workers.voices import BUILTIN_VOICES, DEFAULT_VOICE

from ..appkeys import QUEUE
from ..errors import json_response

# Registered voices carry large fields (speaker embeddings, reference clips): only short scalar
# fields are listed.
_MAX_FIELD_CHARS = 256


async def live_workers(request: web.Request) -> list[dict[str, Any]]:
    """Heartbeats of the workers alive now (their heartbeat key has not expired)."""
    queue = request.app[QUEUE]
    names: Any = await queue.redis.zrange(queue.keys.workers, 0, -1)
    if not names:
        return []
    beats: Any = await queue.redis.mget([queue.keys.worker(n.decode()) for n in names])
    out = []
    for raw in beats:
        if raw is None:
            continue
        try:
            beat = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if isinstance(beat, dict):
            out.append(beat)
    return out


def _public_registered(name: str, raw: bytes) -> dict[str, Any]:
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        data = {}
    fields = {
        k: v
        for k, v in (data.items() if isinstance(data, dict) else ())
        if v is None
        or isinstance(v, bool | int | float)
        or (isinstance(v, str) and len(v) <= _MAX_FIELD_CHARS)
    }
    return {**fields, "name": name, "builtin": False}


async def list_voices(request: web.Request) -> web.Response:
    queue = request.app[QUEUE]
    beats = await live_workers(request)
    registered: dict[bytes, bytes] = await queue.redis.hgetall(queue.keys.voices)  # type: ignore[assignment]
    voices: dict[str, dict[str, Any]] = {}
    engines: dict[tuple[str, str], dict[str, Any]] = {}
    for beat in beats:
        engine = str(beat.get("engine", "unknown"))
        version = str(beat.get("model_version", ""))
        info = engines.setdefault(
            (engine, version),
            {
                "name": engine,
                "model_version": version,
                "sample_rate": beat.get("sample_rate"),
                "workers": 0,
            },
        )
        info["workers"] += 1
        for voice in beat.get("voices") or []:
            if not isinstance(voice, dict) or "name" not in voice:
                continue
            entry = voices.setdefault(voice["name"], {**voice, "engines": []})
            if engine not in entry["engines"]:
                entry["engines"].append(engine)
    if not engines:  # no worker alive: what every engine will speak
        voices = {v.name: {**v.public(), "engines": []} for v in BUILTIN_VOICES}
    for raw_name, raw in sorted(registered.items()):
        name = raw_name.decode()
        voices.setdefault(name, {**_public_registered(name, raw), "engines": []})
    return json_response(
        {
            "voices": list(voices.values()),
            "default": DEFAULT_VOICE,
            "engines": list(engines.values()),
            "workers": len(beats),
        }
    )
