"""The seed-era API's request (`POST /tts/submit`) and its validation errors, in the shapes
FastAPI gave them (web/views/compat/legacy.py)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from core.queue.voices import BUILTIN_VOICES
from core.text.sentences import has_speakable
from web.schemas.compat_answers import LegacyProblem

MAX_CHARS = 500
VOICE_PATTERN = "^(" + "|".join(v.name for v in BUILTIN_VOICES) + ")$"


class LegacyRequest(BaseModel):
    """The old request model: text of 1..500 characters (cleaned before validation)."""

    model_config = ConfigDict(extra="ignore")

    text: str = Field(min_length=1, max_length=MAX_CHARS)
    voice: str | None = Field(None, pattern=VOICE_PATTERN)  # None: the text's language
    # The seed design's "asynchronous queue + callback": POSTed when the job ends.
    callback_url: str | None = None

    @field_validator("text")
    @classmethod
    def _speakable(cls, value: str) -> str:
        if not has_speakable(value):
            raise ValueError("text has no letter or digit to speak")
        return value


def fastapi_detail(errors: list[Any]) -> list[LegacyProblem]:
    """Pydantic's errors as FastAPI wrote them in a 422's `detail`."""
    detail = []
    for error in errors:
        item: LegacyProblem = {
            "type": error["type"],
            "loc": ["body", *error["loc"]],
            "msg": error["msg"],
            "input": error.get("input"),
        }
        if "ctx" in error:
            item["ctx"] = {
                k: v if isinstance(v, int | float | str) else str(v)
                for k, v in error["ctx"].items()
            }
        detail.append(item)
    return detail
