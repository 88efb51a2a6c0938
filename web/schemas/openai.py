"""The OpenAI speech request: body validation, voice mapping (OpenAI names -> ours by the
text's language) and the job it becomes."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from core.audio.catalog import OPENAI_FORMATS
from core.queue.job import SynthesisRequest
from web.errors import ApiError
from web.schemas.jobs import voice_name

FORMATS = OPENAI_FORMATS
STREAM_FORMATS = ("audio", "sse")
MAX_INPUT_CHARS = 4096  # OpenAI's limit; a lower CHATTTS_MAX_TEXT_CHARS bounds it further
MAX_INSTRUCTIONS_CHARS = 4096
SPEED_RANGE = (0.25, 4.0)  # what OpenAI accepts
OUR_SPEED = (0.5, 2.0)  # what our engines do: OpenAI's speeds are clamped into it
DEFAULT_VOICE = "alloy"  # when `voice` is left out (OpenAI requires it; we are lenient)
PARAMS = ("model", "input", "voice", "response_format", "speed", "instructions", "stream_format")
# Ours: a reproducible sample, opting out of the result cache, a stream's audio from its first
# chunk (gaps or not) instead of once it can play without a gap.
EXTENSIONS = ("seed", "cache", "stream_start", "stream_check")
# Kokoro-FastAPI's, which its clients send to /v1/audio/speech: `stream` (true: the audio as it
# is made, Kokoro's default), `lang_code` (taken; the text's language picks the voice's),
# `volume_multiplier` (the answer's loudness), `return_download_link` (the file's path in
# X-Download-Path) and `normalization_options` (its `normalize` is ours).
KOKORO = (
    "stream",
    "lang_code",
    "volume_multiplier",
    "return_download_link",
    "normalization_options",
    "download_format",
)
# Kokoro's normalization switches: each taken, `normalize` honoured (ours spells numbers, units,
# symbols together or not at all).
KOKORO_NORMALIZATION = (
    "normalize",
    "unit_normalization",
    "url_normalization",
    "email_normalization",
    "optional_pluralization_normalization",
    "phone_normalization",
    "replace_remaining_symbols",
)
VOLUME_RANGE = (0.0, 4.0)  # Kokoro's volume_multiplier: the samples scaled, then clipped
# Kokoro-FastAPI's, beside OpenAI's body (POST /dev/captioned_speech).
CAPTIONED_EXTENSIONS = ("return_timestamps", "stream", "lang_code")


@dataclass(frozen=True)
class Speech:
    """A validated OpenAI request: the job to enqueue and how to answer."""

    request: SynthesisRequest
    format: str  # the response format (a stream's job is synthesized as pcm)
    stream: str | None
    input_chars: int
    gain: float = 1.0  # Kokoro's volume_multiplier
    download_link: bool = False  # Kokoro's return_download_link


@dataclass(frozen=True)
class SpeechJob:
    """OpenAI's (and Kokoro's) body read: the job's fields and how to answer."""

    job: dict[str, Any]
    format: str
    stream: str | None
    gain: float = 1.0
    download_link: bool = False


def _bad(message: str, param: str | None, code: str = "invalid_value") -> ApiError:
    return ApiError(400, message, code=code, param=param)


def resolve_voice(voice: Any, text: str) -> str:
    """An OpenAI voice name (by the table and the text's language), a {"id"} object, or ours."""
    if voice is None:
        voice = DEFAULT_VOICE
    if isinstance(voice, dict):
        voice = voice.get("id")
    if not isinstance(voice, str) or not voice.strip():
        raise _bad(
            "'voice' must be a voice name such as 'alloy' or 'zh_female' (GET /v1/voices)",
            "voice",
        )
    try:
        return voice_name(voice, text)
    except ApiError as exc:
        raise _bad(exc.message, "voice") from None


def _number(payload: dict[str, Any], name: str, default: float) -> float:
    value = payload.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _bad(f"'{name}' must be a number", name)
    return float(value)


def _optional_str(payload: dict[str, Any], name: str, limit: int) -> str | None:
    value = payload.get(name)
    if value is not None and (not isinstance(value, str) or len(value) > limit):
        raise _bad(f"'{name}' must be a string of at most {limit} characters", name)
    return value


def speech_job(payload: Any) -> SpeechJob:
    """OpenAI's body -> our job's fields, the response format and the stream format (400 with
    OpenAI's error shape for anything wrong); the job is validated as every job is."""
    if not isinstance(payload, dict):
        raise _bad("the body must be a JSON object", None, "invalid_body")
    unknown = sorted(set(payload) - {*PARAMS, *EXTENSIONS, *KOKORO})
    if unknown:
        raise _bad(
            f"unrecognized request argument {unknown[0]!r}; the arguments are "
            f"{', '.join(PARAMS)} (ours: {', '.join(EXTENSIONS)}; Kokoro's: {', '.join(KOKORO)})",
            unknown[0],
            "unknown_parameter",
        )
    model = payload.get("model")
    if not isinstance(model, str) or not model.strip() or len(model) > 256:
        raise _bad("'model' is required: any model name, e.g. 'tts-1'", "model", "missing_model")
    text = payload.get("input")
    if not isinstance(text, str):
        raise _bad("'input' is required: the text to speak", "input", "missing_input")
    fmt = payload.get("response_format") or "mp3"
    if fmt not in FORMATS:
        raise _bad(f"'response_format' must be one of {', '.join(FORMATS)}", "response_format")
    stream = payload.get("stream_format")
    if stream is not None and stream not in STREAM_FORMATS:
        raise _bad("'stream_format' must be 'audio' or 'sse'", "stream_format")
    download_link = _flag(payload, "return_download_link")
    if stream is None and _flag(payload, "stream") and not download_link:
        stream = "audio"  # Kokoro's `stream: true`: the audio as it is made
    gain = _number(payload, "volume_multiplier", 1.0)
    if not VOLUME_RANGE[0] < gain <= VOLUME_RANGE[1]:
        raise _bad(
            f"'volume_multiplier' must be above {VOLUME_RANGE[0]:g} and at most "
            f"{VOLUME_RANGE[1]:g} (got {gain})",
            "volume_multiplier",
        )
    if gain != 1.0 and download_link:
        raise _bad(
            "'volume_multiplier' changes the answer, not the file kept for the download link: "
            "leave one of 'volume_multiplier' and 'return_download_link' out",
            "volume_multiplier",
        )
    if gain != 1.0 and stream is None:
        stream = "audio"  # scaled as it is encoded: the answer is sent as it is made
    _optional_str(payload, "lang_code", 8)
    _optional_str(payload, "download_format", 8)
    normalize = _normalization(payload.get("normalization_options"))
    speed = _number(payload, "speed", 1.0)
    if not SPEED_RANGE[0] <= speed <= SPEED_RANGE[1]:
        raise _bad(
            f"'speed' must be between {SPEED_RANGE[0]} and {SPEED_RANGE[1]} (got {speed})", "speed"
        )
    _optional_str(payload, "instructions", MAX_INSTRUCTIONS_CHARS)  # accepted, not used
    job: dict[str, Any] = {
        "text": text,
        "voice": resolve_voice(payload.get("voice"), text),
        "format": "pcm" if stream else fmt,
        "speed": min(max(speed, OUR_SPEED[0]), OUR_SPEED[1]),
        "priority": "high",
        "stream": stream is not None,  # chunks of audio while it is synthesized
        **{name: payload[name] for name in EXTENSIONS if name in payload},
        **({"normalize": normalize} if normalize is not None else {}),
    }
    return SpeechJob(job, fmt, stream, gain, download_link)


def _flag(payload: dict[str, Any], name: str) -> bool:
    value = payload.get(name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise _bad(f"'{name}' must be true or false", name)
    return value


def _normalization(options: Any) -> bool | None:
    """Kokoro's `normalization_options`: its `normalize` (None: left out)."""
    if options is None:
        return None
    if not isinstance(options, dict):
        raise _bad("'normalization_options' must be an object", "normalization_options")
    unknown = sorted(set(options) - set(KOKORO_NORMALIZATION))
    if unknown:
        raise _bad(
            f"unrecognized normalization option {unknown[0]!r}; the options are "
            f"{', '.join(KOKORO_NORMALIZATION)}",
            "normalization_options",
        )
    for name, value in options.items():
        if not isinstance(value, bool):
            raise _bad(
                f"normalization option {name!r} must be true or false", "normalization_options"
            )
    normalize = options.get("normalize")
    return normalize if isinstance(normalize, bool) else None


def as_openai(exc: ApiError) -> ApiError:
    """A job's refusal in OpenAI's terms: its field names, and 400 for 422."""
    param = "input" if exc.param == "text" else exc.param
    message = exc.message.replace("'text'", "'input'")
    return ApiError(400, message, code=exc.code, param=param)
