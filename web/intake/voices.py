"""Reading a voice registration: JSON with a speaker embedding, or a form with a reference
recording and its transcript; every field checked (web/schemas/voices.py), every upload bounded
in bytes, parts, time and, for recordings, in what the decoder is asked to do."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from aiohttp import web

from core.audio.isolated import CodecCrashed
from core.voices.formats import VoiceFormat
from web.appkeys import CODECS, MEMORY, QUEUE
from web.errors import ApiError
from web.intake import recordings
from web.intake.bodies import FORM, MULTIPART, form_fields, form_parts, json_body
from web.monitors.fleet import voice_formats
from web.monitors.memory import address
from web.schemas.voices import (
    FORM_FIELDS,
    JSON_FIELDS,
    MAX_RECORDING_BYTES,
    metadata,
    new_name,
    unknown,
)

_MAX_FORM_FIELD_BYTES = 8 * 1024
# A form is a handful of fields (read through the one reader: web/intake/bodies.py).
MAX_FORM_PARTS = len(("name", "transcript", "audio", "language", "gender", "description"))
# What decoding the largest recording allowed takes at its peak (20 s of 192 kHz stereo FLAC:
# libsndfile's decoder, the mono copy, the resampled one), counted in the memory budget while
# it runs: decodes from one address take turns, the process runs a couple at once.
DECODE_BYTES = 112 * 1024 * 1024


def _kind(formats: list[VoiceFormat], data: str) -> str:
    """The data's kind in the first of `formats` that takes it; else the first one's reason."""
    reasons = []
    for voice_format in formats:
        try:
            return voice_format.check(data)
        except ValueError as exc:
            reasons.append(exc)
    raise reasons[0]


async def _check_data(request: web.Request, data: str, param: str) -> str:
    """The voice data's kind, in a format the live workers speak; 422 saying why it is not."""
    formats = await voice_formats(request.app[QUEUE])
    try:
        return await asyncio.to_thread(_kind, formats, data)
    except ValueError as exc:
        raise ApiError(
            422, f"invalid {param!r}: {exc}", code="invalid_voice_data", param=param
        ) from None
    except ImportError as exc:  # a part of the chattts extra the transcript check needs
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
    unknown(payload, JSON_FIELDS)
    name = new_name(payload.get("name"))
    embedding = payload.get("embedding")
    if not isinstance(embedding, str) or not embedding.strip():
        what = (await voice_formats(request.app[QUEUE]))[0].what
        raise ApiError(
            422,
            f"'embedding' is required: {what} (or send a reference recording as "
            "multipart/form-data with 'name', 'transcript' and 'audio')",
            code="missing_field",
            param="embedding",
        )
    embedding = embedding.strip()
    kind = await _check_data(request, embedding, "embedding")
    return {"name": name, "embedding": embedding, "kind": kind, **metadata(payload)}


async def _from_form(request: web.Request) -> dict[str, Any]:
    values: dict[str, Any] = {}
    audio: bytes | None = None
    limit = int(MAX_RECORDING_BYTES * 1.1)  # the file and the few fields around it
    if request.content_type == FORM:  # no file
        values = await form_fields(request, limit, MAX_FORM_PARTS)
        unknown(dict(values), FORM_FIELDS)
    else:
        async for part in form_parts(request, limit, MAX_FORM_PARTS):
            unknown({part.name or "(unnamed)": None}, FORM_FIELDS)
            if part.name == "audio":
                audio = _within(part.data, MAX_RECORDING_BYTES, "the 'audio' file")
            else:
                _within(part.data, _MAX_FORM_FIELD_BYTES, f"field {part.name!r}")
                values[part.name] = part.text()
    name = new_name(values.get("name"))
    voice_format = (await voice_formats(request.app[QUEUE]))[0]
    transcript = (values.get("transcript") or "").strip()
    if not transcript or len(transcript) > voice_format.max_transcript_chars:
        raise ApiError(
            422,
            f"'transcript' is required: what is said in the recording (at most "
            f"{voice_format.max_transcript_chars} characters)",
            code="invalid_transcript",
            param="transcript",
        )
    shortest, longest = span = voice_format.recording_s
    if not audio:
        raise ApiError(
            422,
            f"'audio' is required: a {shortest:g}-{longest:g} s recording "
            "(WAV, FLAC, Ogg or MP3) of the voice saying the transcript",
            code="missing_field",
            param="audio",
        )
    meta = metadata(values)
    if meta["language"] is None:
        meta["language"] = "zh-CN" if re.search(r"[\u4e00-\u9fff]", transcript) else "en"
    codecs = request.app[CODECS]  # native decoders: a file that crashes one fails alone
    try:
        # Its header: refused before any memory is taken.
        probe = recordings.probe
        await asyncio.to_thread(codecs.run, "probing a recording", probe, audio, span)
        with request.app[MEMORY].hold(address(request), DECODE_BYTES, "decoding a recording"):
            what, decode = "decoding a recording", recordings.decode
            mono, rate = await asyncio.to_thread(codecs.run, what, decode, audio, span)
            packed = voice_format.from_recording
            data = await asyncio.to_thread(packed, mono, rate, transcript)
    except (ValueError, CodecCrashed) as exc:
        raise ApiError(
            422, f"invalid 'audio': {exc}", code="invalid_voice_data", param="audio"
        ) from None
    except ImportError as exc:
        raise _extra_missing(exc) from None
    return {"name": name, "embedding": data, "kind": "recording", **meta}


def _within(data: bytes, limit: int, what: str) -> bytes:
    if len(data) > limit:
        raise ApiError(
            413, f"{what} is larger than the limit of {limit} bytes", code="body_too_large"
        )
    return data


async def read_registration(request: web.Request) -> dict[str, Any]:
    """The fields of a registration: JSON with `embedding`, or a recording as a form."""
    if request.content_type in (MULTIPART, FORM):
        return await _from_form(request)
    if request.content_type == "application/json" or request.content_type.endswith("+json"):
        return await _from_json(request)
    raise ApiError(
        415,
        "send JSON ({'name', 'embedding'}) or multipart/form-data ('name', 'transcript' "
        f"and an 'audio' file); got {request.content_type!r}",
        code="unsupported_media_type",
    )
