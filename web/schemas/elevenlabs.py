"""ElevenLabs' text-to-speech body (its HTTP API), as this service reads it: the fields it uses
checked, the rest of ElevenLabs' accepted as they come."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from web.errors import ApiError

# ElevenLabs' own bound on a seed.
MAX_ELEVENLABS_SEED = 2**32 - 1
# apply_text_normalization -> our `normalize` (None: the service's default).
NORMALIZE = {"auto": None, "on": True, "off": False}


class VoiceSettings(BaseModel):
    """What a request's voice_settings may say; `speed` is read, the others are ElevenLabs'."""

    model_config = ConfigDict(extra="allow", strict=True)

    speed: float | None = Field(default=None, gt=0, le=4)


class SpeechBody(BaseModel):
    """`POST /v1/text-to-speech/{voice_id}`'s body: `text`, `voice_settings.speed`, `seed` and
    `apply_text_normalization` are read; `model_id`, `previous_text`, `next_text` and the rest
    are accepted (the voice follows the text's language)."""

    model_config = ConfigDict(extra="allow", strict=True)

    text: str = Field(min_length=1)
    model_id: str | None = None
    voice_settings: VoiceSettings | None = None
    seed: int | None = Field(default=None, ge=0, le=MAX_ELEVENLABS_SEED)
    apply_text_normalization: Literal["auto", "on", "off"] = "auto"


def speech_body(payload: Any) -> SpeechBody:
    """The body read; 422 naming each field at fault."""
    try:
        return SpeechBody.model_validate(payload)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        where = [".".join(str(part) for part in error["loc"]) or "body" for error in errors]
        message = "; ".join(
            f"{loc!r}: {error['msg']}" for loc, error in zip(where, errors, strict=True)
        )
        raise ApiError(422, message, code="invalid_request", param=where[0]) from None
