"""Request validation without I/O (synthesis requests, ids, cursors, callback URLs) and the
parts of a job's answer computed from what is at hand."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from core.infra.networks import Network
from core.queue.job import SynthesisRequest, is_job_id, queue_position
from core.queue.voice_names import VoiceNameError, canonical
from core.queue.voices import default_voice
from core.text.control_tokens import TokenError, check_text_tokens, parse_prompt, strip_tokens
from core.text.sentences import has_speakable
from web.callbacks.targets import check_url
from web.errors import ApiError, job_not_found

# Redis stream ids: two unsigned 64-bit numbers, ASCII digits only (`\d` would take any script's).
_STREAM_ID = re.compile(r"([0-9]{1,20})(?:-([0-9]{1,20}))?")
_U64_MAX = 2**64 - 1
_IDEMPOTENCY_KEY = re.compile(r"[\x20-\x7e]{1,128}")
# A page of a client's jobs (GET /v1/tts/jobs).
DEFAULT_LIST_LIMIT = 20
MAX_LIST_LIMIT = 100  # jobs a page: each is one read of its record
FIELDS = (*SynthesisRequest.model_fields, "callback_url")  # (callback_url is checked apart)


def valid_job_id(job_id: str) -> str:
    """Job ids are uuid4 hex; anything else cannot exist (and must not reach a Redis key)."""
    if not is_job_id(job_id):
        raise job_not_found(job_id)
    return job_id


def valid_cursor(value: str | None, param: str = "last_event_id") -> str | None:
    if value is None or value.strip() == "":
        return None
    value = value.strip()
    match = _STREAM_ID.fullmatch(value)
    ms, seq = (int(match[1]), int(match[2] or 0)) if match else (0, 0)
    # Beyond 64 bits Redis refuses the id; nothing can come after the largest id of all.
    if match is None or ms > _U64_MAX or seq > _U64_MAX or (ms, seq) == (_U64_MAX, _U64_MAX):
        raise ApiError(
            400,
            f"{param!r} must be an event id such as '1700000000000-0' (the SSE id of an event)",
            code="invalid_cursor",
            param=param,
        )
    return value


def idempotency_key(value: str | None) -> str | None:
    if value is None:
        return None
    if not _IDEMPOTENCY_KEY.fullmatch(value):
        raise ApiError(
            400,
            "the Idempotency-Key header must be 1 to 128 printable ASCII characters",
            code="invalid_idempotency_key",
            param="Idempotency-Key",
        )
    return value


def voice_name(voice: str, text: str) -> str:
    """A request's voice as the queue keeps it (core/queue/voice_names.py); 422 for a bad blend."""
    try:
        return canonical(voice, text)
    except VoiceNameError as exc:
        raise ApiError(422, str(exc), code="invalid_voice", param="voice") from None


def _describe(errors: list[Any]) -> ApiError:
    """Turn pydantic's errors into one message that names each field and what to fix."""
    parts: list[str] = []
    first_param: str | None = None
    first_code = "invalid_request"
    for error in errors:
        loc = ".".join(str(p) for p in error["loc"])
        if error["type"] == "extra_forbidden":
            parts.append(f"unknown field {loc!r} (the fields are {', '.join(FIELDS)})")
            code = "unknown_field"
        elif error["type"] == "missing":
            parts.append(f"{loc!r} is required")
            code = "missing_field"
        elif error["type"] == "model_type":
            parts.append("the body must be a JSON object")
            code = "invalid_body"
        else:
            parts.append(f"invalid {loc!r}: {error['msg']}")
            code = f"invalid_{loc}" if loc in FIELDS else "invalid_value"
        if first_param is None:
            first_param, first_code = (loc or None), code
    return ApiError(422, "; ".join(parts), code=first_code, param=first_param)


def synthesis(
    payload: dict[str, Any], max_chars: int, document_chars: int | None = None
) -> SynthesisRequest:
    """Validate a submission whose text is cleaned: text of 1..max_chars with known control
    tokens only, a sentence prompt of known tokens (with `refine`), known format, no extras.
    Whether its voice exists is the queue's to say (web/intake/submissions.py)."""
    payload = dict(payload)
    text = payload.get("text")
    if isinstance(text, str):
        check_text(text, max_chars, document_chars)
    prompt = payload.get("prompt")
    if isinstance(prompt, str):
        payload["prompt"] = check_prompt(prompt)
    voice = payload.get("voice")
    if voice is None and isinstance(payload.get("text"), str):
        payload["voice"] = default_voice(payload["text"])  # the text's language, as OpenAI's
    elif isinstance(voice, str) and isinstance(payload.get("text"), str):
        # OpenAI's and Kokoro's names, seeds and blends: as the queue keeps them.
        payload["voice"] = voice_name(voice, payload["text"])
    try:
        request = SynthesisRequest.model_validate(payload)
    except ValidationError as exc:
        raise _describe(exc.errors(include_url=False, include_input=False)) from None
    if request.prompt is not None and not request.refine:
        raise ApiError(
            422,
            "'prompt' is the prompt of ChatTTS's refinement pass, which runs only with "
            "'refine': true; send both, or leave 'prompt' out",
            code="prompt_needs_refine",
            param="prompt",
        )
    return request


def callback_url(payload: dict[str, Any], allow: tuple[Network, ...]) -> str | None:
    """Pop and check a submission's `callback_url` (web/callbacks/targets.py): None when absent."""
    raw = payload.pop("callback_url", None)
    if raw is None:
        return None
    try:
        return check_url(raw, allow)
    except ValueError as exc:
        raise ApiError(422, str(exc), code="invalid_callback_url", param="callback_url") from None


def check_length(text: str, max_chars: int, document_chars: int | None = None) -> None:
    """Refuse text past its limit, as sent (the limit the API document states) and once
    cleaned alike. With `document_chars` (POST /v1/tts/jobs: a job may be a whole document),
    past that many characters is a 413 that names the limit."""
    if document_chars is not None and len(text) > document_chars:
        raise ApiError(
            413,
            f"'text' has {len(text)} characters; a job holds at most {document_chars} "
            "(CHATTTS_MAX_DOCUMENT_CHARS): split it into several jobs",
            code="text_too_long",
            param="text",
        )
    max_chars = max(max_chars, document_chars or 0)
    if len(text) > max_chars:
        raise ApiError(
            422,
            f"'text' has {len(text)} characters; the limit is {max_chars}: "
            "split it into several jobs",
            code="text_too_long",
            param="text",
        )


def check_text(cleaned: str, max_chars: int, document_chars: int | None = None) -> None:
    """Refuse empty, overlong or unspeakable text (overlong: as check_length)."""
    check_length(cleaned, max_chars, document_chars)
    if not cleaned:
        raise ApiError(
            422,
            "'text' is empty once invisible and control characters are removed; "
            f"send 1 to {max(max_chars, document_chars or 0)} characters",
            code="text_empty",
            param="text",
        )
    try:
        check_text_tokens(cleaned)
    except TokenError as exc:
        raise ApiError(422, exc.message, code=exc.code, param="text") from None
    if not has_speakable(strip_tokens(cleaned)):
        raise ApiError(
            422,
            "'text' has no letter or digit to speak (control tokens such as [laugh] are not "
            "speech)",
            code="text_not_speakable",
            param="text",
        )


def check_prompt(prompt: str) -> str:
    """A sentence prompt (ChatTTS's refinement prompt), compacted; 422 naming a bad token."""
    try:
        return parse_prompt(prompt)
    except TokenError as exc:
        raise ApiError(422, exc.message, code=exc.code, param="prompt") from None


# -- response bodies ---------------------------------------------------------------------------


def position(snapshot: Mapping[str, Any], seq: int, started_seq: int) -> int | None:
    """Jobs ahead of a queued job (0 = next); None once it left the queue. As Queue.position.
    (`seq`, the job's place in the queue-wide count, is kept from clients: it tells volume.)"""
    if snapshot.get("state") != "queued":
        return None
    return queue_position(seq, started_seq)
