"""Request validation (JSON bodies, synthesis requests, ids, cursors) and job response parts."""

from __future__ import annotations

import asyncio
import functools
import re
from typing import Any

import orjson
from aiohttp import web
from pydantic import ValidationError

from core.infra.settings import Network
from core.queue.job import SynthesisRequest, is_job_id, queue_position
from core.queue.store import Queue
from core.queue.voices import BUILTIN_BY_NAME, default_voice, openai_voice
from core.text.control_tokens import TokenError, check_text_tokens, parse_prompt, strip_tokens
from core.text.sentences import clean_text, has_speakable
from web.appkeys import MEMORY, SETTINGS
from web.callbacks.targets import check_url, parse_allow
from web.errors import ApiError, job_not_found
from web.monitors.fleet import check_registered_voice, check_speakable
from web.monitors.memory import address

# Redis stream ids: two unsigned 64-bit numbers, ASCII digits only (`\d` would take any script's).
_STREAM_ID = re.compile(r"([0-9]{1,20})(?:-([0-9]{1,20}))?")
_U64_MAX = 2**64 - 1
_IDEMPOTENCY_KEY = re.compile(r"[\x20-\x7e]{1,128}")
# A body that has not fully arrived after this long is given up (a stalled or truncated upload).
BODY_TIMEOUT_S = 30.0
# Cleaning this many characters takes well under a millisecond; longer text is cleaned off-loop.
_CLEAN_ON_LOOP = 20_000
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


async def read_body(request: web.Request) -> bytes:
    """The raw body: 415 when compressed, 413 over the limit, 408 when it stops arriving.

    The app reads bodies undecoded (`auto_decompress=False`): no client of this API compresses
    requests, and aiohttp's decoders can hang on a truncated stream or answer below our shape.
    """
    coding = request.headers.get("Content-Encoding", "identity").strip().lower()
    if coding not in ("", "identity"):
        raise ApiError(
            415,
            f"request bodies are not accepted with Content-Encoding {coding[:40]!r}; "
            "send them uncompressed",
            code="unsupported_content_encoding",
        )
    limit = request.app[SETTINGS].max_body_bytes
    if request.content_length is not None and request.content_length > limit:
        raise ApiError(
            413,
            f"the request body is larger than the limit of {limit} bytes",
            code="body_too_large",
        )
    if request.content.is_eof():  # all of it came with the headers: nothing to wait for
        return await request.read()  # aiohttp enforces client_max_size while reading
    # What the body may grow to while it arrives, counted until it has (a stalled body holds it).
    size = min(request.content_length or limit, limit)
    try:
        with request.app[MEMORY].hold(address(request), size, "the request body"):
            async with asyncio.timeout(BODY_TIMEOUT_S):
                return await request.read()
    except TimeoutError:
        raise ApiError(
            408,
            f"the request body did not arrive within {BODY_TIMEOUT_S:.0f} s",
            code="body_timeout",
            headers={"Connection": "close"},
        ) from None


async def json_body(request: web.Request) -> Any:
    """The parsed JSON body: 415 for another content type, 413 over the limit, 400 if broken."""
    if request.content_type != "application/json" and not request.content_type.endswith("+json"):
        raise ApiError(
            415,
            f"send the body as JSON with 'Content-Type: application/json' "
            f"(got {request.content_type!r})",
            code="unsupported_media_type",
        )
    raw = await read_body(request)
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, f"the body is not valid JSON: {exc}", code="invalid_json") from None


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


async def synthesis_request(
    queue: Queue,
    payload: Any,
    max_chars: int,
    document_chars: int | None = None,
    client: str | None = None,
    **fixed: Any,
) -> SynthesisRequest:
    """Validate a submission: cleaned text of 1..max_chars with known control tokens only, a
    sentence prompt of known tokens (with `refine`), known voice and format, no extras."""
    if not isinstance(payload, dict):
        raise ApiError(422, "the body must be a JSON object", code="invalid_body")
    payload = {**payload, **fixed}
    text = payload.get("text")
    if isinstance(text, str):
        cleaned = await clean(text)
        check_text(cleaned, max_chars, document_chars)
        payload["text"] = cleaned
    prompt = payload.get("prompt")
    if isinstance(prompt, str):
        payload["prompt"] = check_prompt(prompt)
    voice = payload.get("voice")
    if voice is None and isinstance(payload.get("text"), str):
        payload["voice"] = default_voice(payload["text"])  # the text's language, as OpenAI's
    elif isinstance(voice, str) and isinstance(payload.get("text"), str):
        # An OpenAI voice name works here as on /v1/audio/speech: ours, by the text's language.
        payload["voice"] = openai_voice(voice, payload["text"]) or voice
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
    await check_voice(queue, request.voice, client)
    if request.voice not in BUILTIN_BY_NAME:
        await check_registered_voice(queue, request.voice)
    await check_speakable(queue, request.text, request.voice, request.normalize)
    return request


def callback_url(payload: dict[str, Any], allow: str) -> str | None:
    """Pop and check a submission's `callback_url` (web/callbacks/targets.py): None when absent."""
    raw = payload.pop("callback_url", None)
    if raw is None:
        return None
    try:
        return check_url(raw, _allowed(allow))
    except ValueError as exc:
        raise ApiError(422, str(exc), code="invalid_callback_url", param="callback_url") from None


@functools.cache
def _allowed(allow: str) -> tuple[Network, ...]:
    return parse_allow(allow)


async def clean(text: str) -> str:
    """clean_text, off the event loop when the text is long (bodies may hold megabytes)."""
    if len(text) > _CLEAN_ON_LOOP:
        return await asyncio.to_thread(clean_text, text)
    return clean_text(text)


def check_text(cleaned: str, max_chars: int, document_chars: int | None = None) -> None:
    """Refuse empty, overlong or unspeakable text. With `document_chars` (POST /v1/tts/jobs:
    a job may be a whole document), past that many characters is a 413 that names the limit."""
    if document_chars is not None and len(cleaned) > document_chars:
        raise ApiError(
            413,
            f"'text' has {len(cleaned)} characters; a job holds at most {document_chars} "
            "(CHATTTS_MAX_DOCUMENT_CHARS): split it into several jobs",
            code="text_too_long",
            param="text",
        )
    max_chars = max(max_chars, document_chars or 0)
    if not cleaned:
        raise ApiError(
            422,
            "'text' is empty once invisible and control characters are removed; "
            f"send 1 to {max_chars} characters",
            code="text_empty",
            param="text",
        )
    if len(cleaned) > max_chars:
        raise ApiError(
            422,
            f"'text' has {len(cleaned)} characters; the limit is {max_chars}: "
            "split it into several jobs",
            code="text_too_long",
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


async def check_voice(queue: Queue, voice: str, client: str | None = None) -> None:
    """A built-in voice, or one registered by `client` (or by nobody in particular: voices
    from before owners); 422 naming the voices this client may use. Another client's voice is
    unknown here: its name says nothing of whether it exists."""
    if voice in BUILTIN_BY_NAME:
        return
    raw = await queue.voices.metadata(voice)
    if raw is not None and (client is None or voice_owner(raw) in (None, client)):
        return
    mine = sorted(await queue.voices.owned(client)) if client is not None else []
    raise ApiError(
        422,
        f"unknown voice {voice!r}; the voices are {', '.join([*BUILTIN_BY_NAME, *mine])} "
        "(GET /v1/voices)",
        code="unknown_voice",
        param="voice",
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


# -- response bodies ---------------------------------------------------------------------------


_JOB_URLS = {
    "status_url": "job",
    "audio_url": "job_audio",
    "events_url": "job_events",
    "subtitles_url": "job_subtitles",
}


def job_urls(app: web.Application, job_id: str) -> dict[str, str]:
    router = app.router
    if is_job_id(job_id):
        # What url_for builds, at a fraction of its cost (it runs on every submit): a job id is
        # hex, nothing in it to quote.
        return {
            key: router[name].canonical.format(job_id=job_id) for key, name in _JOB_URLS.items()
        }
    return {
        "status_url": str(router["job"].url_for(job_id=job_id)),
        "audio_url": str(router["job_audio"].url_for(job_id=job_id)),
        "events_url": str(router["job_events"].url_for(job_id=job_id)),
        "subtitles_url": str(router["job_subtitles"].url_for(job_id=job_id)),
    }


def position(snapshot: dict[str, Any], seq: int, started_seq: int) -> int | None:
    """Jobs ahead of a queued job (0 = next); None once it left the queue. As Queue.position.
    (`seq`, the job's place in the queue-wide count, is kept from clients: it tells volume.)"""
    if snapshot.get("state") != "queued":
        return None
    return queue_position(seq, started_seq)
