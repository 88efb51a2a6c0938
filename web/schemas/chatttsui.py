"""ChatTTS-ui's `/tts` fields (query string or form), cast and defaulted as it does, and the job
they become; its answers' shapes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from web.errors import ApiError
from web.schemas.compat_answers import TtsAnswer, TtsFailure, TtsFile

DEFAULT_VOICE = "2222"  # ChatTTS-ui's: a seed
DEFAULT_TEXT_SEED = 42  # ChatTTS-ui seeds every request's sampling with it unless told 0
DEFAULT_SPEED_LEVEL = 5  # its `[speed_5]`: our speed 1.0
# Its fields; `is_split` and `is_stream` (pyVideoTrans and its page send them) and the token
# budgets are taken and not needed: every job is cut into sentences, and sized by its text.
FIELDS = (
    "text",
    "voice",
    "custom_voice",
    "prompt",
    "temperature",
    "top_p",
    "top_k",
    "skip_refine",
    "speed",
    "text_seed",
    "refine_max_new_token",
    "infer_max_new_token",
    "wav",
    "is_stream",
    "is_split",
)
_SPEAKER_FILES = (".csv", ".pt")  # ChatTTS-ui's saved voices are named by their seed


@dataclass(frozen=True)
class TtsCall:
    """A `/tts` call: the job's fields, and whether to answer with the WAV itself."""

    job: dict[str, Any]
    wav: bool


def failure(message: str) -> TtsFailure:
    """ChatTTS-ui's error answer (sent with HTTP 200: its clients read `code`)."""
    return {"code": 1, "msg": message}


def speed_factor(level: int) -> float:
    """ChatTTS's `[speed_N]` (0-9, 5 normal) as our speed factor: the inverse of the engine's
    speed_level (0 -> 0.5, 5 -> 1.0, 9 -> 2.0)."""
    level = min(9, max(0, level))
    return 0.5 + level / 10 if level <= 5 else 1.0 + (level - 5) / 4


def _cast(fields: Mapping[str, str], name: str, kind: Callable[[str], Any], default: Any) -> Any:
    value = fields.get(name, "").strip()
    if not value:
        return default
    try:
        return kind(value)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise ApiError(
            422, f"'{name}' must be {what} (got {value[:40]!r})", code="invalid_value", param=name
        ) from None


def _voice(fields: Mapping[str, str]) -> str:
    custom = _cast(fields, "custom_voice", int, 0)
    if custom > 0:
        return str(custom)
    voice = fields.get("voice", "").strip() or DEFAULT_VOICE
    for suffix in _SPEAKER_FILES:
        if voice.endswith(suffix) and voice[: -len(suffix)].isdigit():
            return voice[: -len(suffix)]
    return voice


def tts_call(fields: Mapping[str, str]) -> TtsCall:
    """The fields of one call (the query string's first, then the form's) as our job."""
    text = fields.get("text", "").strip()
    if not text:
        raise ApiError(422, "text params lost: send 'text'", code="missing_text", param="text")
    prompt = fields.get("prompt", "").strip()
    refine = _cast(fields, "skip_refine", int, 0) == 0
    text_seed = _cast(fields, "text_seed", int, DEFAULT_TEXT_SEED)
    for budget in ("refine_max_new_token", "infer_max_new_token", "is_stream", "is_split"):
        _cast(fields, budget, int, 0)  # taken, and checked like the rest
    job: dict[str, Any] = {
        "text": text,
        "voice": _voice(fields),
        "format": "wav",
        "temperature": _cast(fields, "temperature", float, 0.3),
        "top_p": _cast(fields, "top_p", float, 0.7),
        "top_k": _cast(fields, "top_k", int, 20),
        "speed": speed_factor(_cast(fields, "speed", int, DEFAULT_SPEED_LEVEL)),
        "refine": refine,
        **({"prompt": prompt} if prompt and refine else {}),
        **({"seed": text_seed} if text_seed > 0 else {}),
    }
    return TtsCall(job, _cast(fields, "wav", int, 0) > 0)


def answer(filename: str, url: str, inference_s: float, duration_s: float) -> TtsAnswer:
    """ChatTTS-ui's success answer: its list of files, and the first one's `filename` and `url`
    at the top (what pyVideoTrans reads)."""
    audio: TtsFile = {
        "filename": filename,
        "url": url,
        "inference_time": round(inference_s, 2),
        "audio_duration": round(duration_s, 2),
    }
    return {"code": 0, "msg": "ok", "audio_files": [audio], "filename": filename, "url": url}
