"""Voices: list them (`GET /v1/voices`), register (`POST`), show and delete (`/v1/voices/{name}`).

A registered voice is ChatTTS voice data kept in the Redis hash `keys.voices`, shared by every
worker: a speaker-embedding string sent as JSON, or a short reference recording with its
transcript sent as multipart/form-data (stored as PCM; a worker encodes it into a ChatTTS sample
prompt the first time the voice is used). Voice data is validated here without the model.
"""

from __future__ import annotations

import asyncio
import io
import re
import time
from typing import Any

import numpy as np
import orjson
import soundfile as sf
from aiohttp import BodyPartReader, web

from web.appkeys import QUEUE
from web.errors import ApiError, json_response, not_found
from web.fleet import live_heartbeats
from web.schemas import json_body
from workers.engines.chattts.voices import (
    MAX_RECORDING_S,
    MIN_RECORDING_S,
    recording_voice_data,
    validate_voice_data,
)
from workers.queue.voices import BUILTIN_BY_NAME, BUILTIN_VOICES, DEFAULT_VOICE

# Registered voices carry large fields (speaker embeddings, reference clips): only short scalar
# fields are listed, and never the voice data itself.
_MAX_FIELD_CHARS = 256
_PRIVATE_FIELDS = frozenset({"embedding"})
NAME = re.compile(r"[a-z0-9][a-z0-9_-]{1,40}")
_LANGUAGE = re.compile(r"[A-Za-z]{2,3}(?:-[A-Za-z0-9]{2,8}){0,3}")
# A 20 s recording as 48 kHz stereo 32-bit WAV is 7.7 MB; compressed formats are far smaller.
MAX_RECORDING_BYTES = 10 * 1024 * 1024
_MAX_FORM_FIELD_BYTES = 8 * 1024
MAX_TRANSCRIPT_CHARS = 500
_LIMITS = {"language": 35, "gender": 32, "description": _MAX_FIELD_CHARS}
JSON_FIELDS = ("name", "embedding", "language", "gender", "description")
FORM_FIELDS = ("name", "transcript", "audio", "language", "gender", "description")


async def live_workers(request: web.Request) -> list[dict[str, Any]]:
    """Heartbeats of the workers alive now (their heartbeat key has not expired)."""
    return await live_heartbeats(request.app[QUEUE])


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


# -- one voice ----------------------------------------------------------------------------------


def _new_name(name: Any) -> str:
    """A valid name for a voice to register (409 for a built-in voice's name)."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ApiError(
            422,
            "'name' must be 2 to 41 characters: lowercase letters, digits, '_' and '-', "
            "starting with a letter or digit",
            code="invalid_voice_name",
            param="name",
        )
    if name in BUILTIN_BY_NAME:
        raise ApiError(
            409, f"{name!r} is a built-in voice; choose another name", code="voice_exists"
        )
    return name


async def get_voice(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    builtin = BUILTIN_BY_NAME.get(name)
    if builtin is not None:
        return json_response(builtin.public())
    queue = request.app[QUEUE]
    raw: bytes | None = None
    if NAME.fullmatch(name):
        raw = await queue.redis.hget(queue.keys.voices, name)  # type: ignore[assignment]
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
    if not NAME.fullmatch(name) or not await queue.redis.hdel(queue.keys.voices, name):
        raise not_found(f"no registered voice named {name[:64]!r}", "voice_not_found")
    return json_response({"name": name, "deleted": True})


async def register_voice(request: web.Request) -> web.Response:
    """201 with the voice (without its data): JSON with `embedding`, or a recording as a form."""
    if request.content_type in ("multipart/form-data", "application/x-www-form-urlencoded"):
        fields = await _from_form(request)
    elif request.content_type == "application/json" or request.content_type.endswith("+json"):
        fields = await _from_json(request)
    else:
        raise ApiError(
            415,
            "send JSON ({'name', 'embedding'}) or multipart/form-data ('name', 'transcript' "
            f"and an 'audio' file); got {request.content_type!r}",
            code="unsupported_media_type",
        )
    name = fields["name"]
    record = {**fields, "created_at": time.time(), "builtin": False}
    queue = request.app[QUEUE]
    if not await queue.redis.hsetnx(queue.keys.voices, name, orjson.dumps(record)):
        raise ApiError(
            409,
            f"a voice named {name!r} is already registered; delete it first "
            f"(DELETE /v1/voices/{name}) or choose another name",
            code="voice_exists",
        )
    location = str(request.app.router["voice"].url_for(name=name))
    body = _public_registered(name, orjson.dumps(record))
    return json_response(body, status=201, headers={"Location": location})


def _metadata(values: dict[str, Any]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for field, limit in _LIMITS.items():
        value = values.get(field)
        if value is not None and (not isinstance(value, str) or len(value) > limit):
            raise ApiError(
                422,
                f"{field!r} must be a string of at most {limit} characters",
                code=f"invalid_{field}",
                param=field,
            )
        out[field] = (value.strip() or None) if isinstance(value, str) else None
    language = out["language"]
    if language is not None and not _LANGUAGE.fullmatch(language):
        raise ApiError(
            422,
            "'language' must be a language tag such as 'zh-CN' or 'en'",
            code="invalid_language",
            param="language",
        )
    return out


def _unknown(values: dict[str, Any], allowed: tuple[str, ...]) -> None:
    extra = sorted(set(values) - set(allowed))
    if extra:
        raise ApiError(
            422,
            f"unknown field {extra[0]!r} (the fields are {', '.join(allowed)})",
            code="unknown_field",
            param=extra[0],
        )


async def _check_data(data: str, param: str) -> str:
    """The voice data's kind; 422 with validate_voice_data's reason when it is not usable."""
    try:
        return await asyncio.to_thread(validate_voice_data, data)
    except ValueError as exc:
        raise ApiError(
            422, f"invalid {param!r}: {exc}", code="invalid_voice_data", param=param
        ) from None
    except ImportError as exc:  # cn2an/num2words: the transcript has numbers to spell out
        raise _extra_missing(exc) from None


def _extra_missing(exc: ImportError) -> ApiError:
    return ApiError(
        500,
        f"this server cannot check voice transcripts ({exc}); install the chattts extra "
        "(pip install '.[chattts]') on the web tier",
        code="chattts_extra_missing",
    )


async def _from_json(request: web.Request) -> dict[str, Any]:
    payload = await json_body(request)
    if not isinstance(payload, dict):
        raise ApiError(422, "the body must be a JSON object", code="invalid_body")
    _unknown(payload, JSON_FIELDS)
    name = _new_name(payload.get("name"))
    embedding = payload.get("embedding")
    if not isinstance(embedding, str) or not embedding.strip():
        raise ApiError(
            422,
            "'embedding' is required: a ChatTTS speaker embedding string (or send a reference "
            "recording as multipart/form-data with 'name', 'transcript' and 'audio')",
            code="missing_field",
            param="embedding",
        )
    embedding = embedding.strip()
    kind = await _check_data(embedding, "embedding")
    return {"name": name, "embedding": embedding, "kind": kind, **_metadata(payload)}


async def _read_part(part: BodyPartReader, limit: int, what: str) -> bytes:
    data = bytearray()
    while chunk := await part.read_chunk(64 * 1024):
        data += chunk
        if len(data) > limit:
            raise ApiError(
                413, f"{what} is larger than the limit of {limit} bytes", code="body_too_large"
            )
    return bytes(data)


async def _from_form(request: web.Request) -> dict[str, Any]:
    if request.content_length is not None and request.content_length > MAX_RECORDING_BYTES * 1.1:
        raise ApiError(
            413,
            f"the request body is larger than the limit of {MAX_RECORDING_BYTES} bytes",
            code="body_too_large",
        )
    values: dict[str, Any] = {}
    audio: bytes | None = None
    if request.content_type == "application/x-www-form-urlencoded":  # a form without its file
        posted = await request.post()
        _unknown(dict(posted), FORM_FIELDS)
        values = {k: v for k, v in posted.items() if isinstance(v, str)}
    else:
        try:
            audio = await _read_multipart(request, values)
        except ValueError as exc:  # no boundary, or a body that does not follow it
            message = f"the multipart/form-data body could not be read: {exc}"
            raise ApiError(400, message, code="invalid_multipart") from None
    name = _new_name(values.get("name"))
    transcript = (values.get("transcript") or "").strip()
    if not transcript or len(transcript) > MAX_TRANSCRIPT_CHARS:
        raise ApiError(
            422,
            f"'transcript' is required: what is said in the recording (at most "
            f"{MAX_TRANSCRIPT_CHARS} characters)",
            code="invalid_transcript",
            param="transcript",
        )
    if not audio:
        raise ApiError(
            422,
            f"'audio' is required: a {MIN_RECORDING_S:g}-{MAX_RECORDING_S:g} s recording "
            "(WAV, FLAC or Ogg) of the voice saying the transcript",
            code="missing_field",
            param="audio",
        )
    meta = _metadata(values)
    if meta["language"] is None:
        meta["language"] = "zh-CN" if re.search(r"[\u4e00-\u9fff]", transcript) else "en"
    try:
        data = await asyncio.to_thread(_pack_recording, audio, transcript)
    except ValueError as exc:
        raise ApiError(
            422, f"invalid 'audio': {exc}", code="invalid_voice_data", param="audio"
        ) from None
    except ImportError as exc:
        raise _extra_missing(exc) from None
    return {"name": name, "embedding": data, "kind": "recording", **meta}


async def _read_multipart(request: web.Request, values: dict[str, Any]) -> bytes | None:
    """Read the form's text fields into `values`; return the `audio` file's bytes, if sent."""
    audio: bytes | None = None
    reader = await request.multipart()
    while (part := await reader.next()) is not None:
        if not isinstance(part, BodyPartReader):
            raise ApiError(422, "nested multipart bodies are not accepted", code="invalid_body")
        _unknown({part.name or "(unnamed)": None}, FORM_FIELDS)
        if part.name == "audio":
            audio = await _read_part(part, MAX_RECORDING_BYTES, "the 'audio' file")
        else:
            raw = await _read_part(part, _MAX_FORM_FIELD_BYTES, f"field {part.name!r}")
            values[str(part.name)] = raw.decode(part.get_charset("utf-8"), errors="replace")
    return audio


def _pack_recording(audio: bytes, transcript: str) -> str:
    """Decode a recording (any format libsndfile reads) and pack it as ChatTTS voice data."""
    try:
        with sf.SoundFile(io.BytesIO(audio)) as f:
            seconds = f.frames / f.samplerate if f.samplerate else 0.0
            if not MIN_RECORDING_S <= seconds <= MAX_RECORDING_S:
                raise ValueError(
                    f"the recording lasts {seconds:.1f} s: "
                    f"{MIN_RECORDING_S:g}-{MAX_RECORDING_S:g} s needed"
                )
            samples = f.read(dtype="float32", always_2d=True)
            rate = f.samplerate
    except (sf.LibsndfileError, RuntimeError, TypeError) as exc:
        raise ValueError(
            f"it could not be decoded as audio (send WAV, FLAC or Ogg): {exc}"
        ) from None
    mono: np.ndarray = samples.mean(axis=1)
    return recording_voice_data(mono, rate, transcript)
