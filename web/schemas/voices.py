"""A voice registration's fields checked without I/O (its name, its metadata, which fields each
form takes), and what a registered voice's stored metadata says and shows."""

from __future__ import annotations

import re
from typing import Any, cast

import orjson

from core.queue.voice_names import alias, seed_of
from core.queue.voices import BUILTIN_BY_NAME
from web.errors import ApiError
from web.schemas.answers import Voice

NAME = re.compile(r"[a-z0-9][a-z0-9_-]{1,40}")
_MAX_FIELD_CHARS = 256
_LANGUAGE = re.compile(r"[A-Za-z]{2,3}(?:-[A-Za-z0-9]{2,8}){0,3}")
# A 20 s recording as 48 kHz stereo 32-bit WAV is 7.7 MB; compressed formats are far smaller.
MAX_RECORDING_BYTES = 10 * 1024 * 1024
FIELD_LIMITS = {"language": 35, "gender": 32, "description": _MAX_FIELD_CHARS}
JSON_FIELDS = ("name", "embedding", "language", "gender", "description")
FORM_FIELDS = ("name", "transcript", "audio", "language", "gender", "description")
# Registered voices carry large fields (speaker embeddings, reference clips): only short scalar
# fields are shown, and never the voice data itself.
_PRIVATE_FIELDS = frozenset({"embedding", "owner", "source"})


def new_name(name: Any) -> str:
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
    if seed_of(name) is not None or alias(name, "") is not None:
        raise ApiError(
            409,
            f"{name!r} already names a voice (a seed voice, or OpenAI's or Kokoro's name for one "
            "of ours); choose another name",
            code="voice_exists",
        )
    return name


def metadata(values: dict[str, Any]) -> dict[str, str | None]:
    """The optional fields (`language`, `gender`, `description`), each within its limit."""
    out: dict[str, str | None] = {}
    for field, limit in FIELD_LIMITS.items():
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


def unknown(values: dict[str, Any], allowed: tuple[str, ...]) -> None:
    """422 naming the first field that is not one of `allowed`."""
    extra = sorted(set(values) - set(allowed))
    if extra:
        raise ApiError(
            422,
            f"unknown field {extra[0]!r} (the fields are {', '.join(allowed)})",
            code="unknown_field",
            param=extra[0],
        )


def voice_owner(raw: bytes | str) -> str | None:
    """Who registered a voice (None: registered before voices had owners; anyone uses it)."""
    return voice_field(raw, "owner")


def voice_field(raw: bytes | str, name: str) -> str | None:
    """A string field of a registered voice's metadata (None: absent, or not a string)."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    value = data.get(name) if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


def public_fields(name: str, raw: bytes) -> Voice:
    """What a registered voice shows: its short scalar fields, never its data, owner or source."""
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
    return cast(Voice, {**fields, "name": name, "builtin": False})
