"""The JSON Schemas of the request bodies, for the OpenAPI document (web/views/service/
api_docs.py): from the pydantic models that validate them, or from the constants the hand-written
validators check against (never a hand-kept copy)."""

from __future__ import annotations

from typing import Any

from core.infra.settings import Settings
from core.queue.job import SynthesisRequest
from core.queue.voices import DEFAULT_VOICES, OPENAI_VOICES
from web.schemas import admin
from web.schemas import openai as speech
from web.schemas import voices as registration
from web.schemas.elevenlabs import SpeechBody
from web.schemas.legacy import LegacyRequest

Schema = dict[str, Any]


def job_request(settings: Settings) -> Schema:
    schema = SynthesisRequest.model_json_schema()
    # What the web tier takes: a job's text, or a whole document's.
    schema["properties"]["text"]["maxLength"] = max(
        settings.limits.max_text_chars, settings.limits.max_document_chars
    )
    schema.pop("title", None)
    voice = schema["properties"]["voice"]
    voice.pop("default", None)  # the web tier picks by the text's language
    schema["properties"]["voice"] = {
        "anyOf": [voice, {"type": "null"}],
        "description": (
            f"a voice of GET /v1/voices, or an OpenAI voice name ({', '.join(OPENAI_VOICES)}); "
            f"null or left out: {DEFAULT_VOICES['zh']} for Mandarin text, "
            f"{DEFAULT_VOICES['en']} otherwise"
        ),
    }
    schema["properties"]["callback_url"] = {
        "anyOf": [{"type": "string", "format": "uri"}, {"type": "null"}],
        "description": "POSTed (Standard Webhooks) when the job ends",
    }
    schema["description"] = "A synthesis job."
    return schema


def _nullable(schema: Schema) -> Schema:
    return {"anyOf": [schema, {"type": "null"}]}


def speech_request(settings: Settings) -> Schema:
    number = {"type": "number"}
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["model", "input"],
        "properties": {
            "model": {"type": "string", "minLength": 1, "maxLength": 256},
            "input": {
                "type": "string",
                "maxLength": min(speech.MAX_INPUT_CHARS, settings.limits.max_text_chars),
            },
            "voice": {
                "anyOf": [
                    {"type": "string", "minLength": 1},
                    {"type": "object", "properties": {"id": {"type": "string"}}},
                    {"type": "null"},
                ],
                "description": f"default {speech.DEFAULT_VOICE}, by the input's language",
            },
            "response_format": {"enum": [*speech.FORMATS, None], "default": "mp3"},
            "speed": {
                "anyOf": [
                    {**number, "minimum": speech.SPEED_RANGE[0], "maximum": speech.SPEED_RANGE[1]},
                    {"type": "null"},
                ]
            },
            "instructions": {
                "anyOf": [
                    {"type": "string", "maxLength": speech.MAX_INSTRUCTIONS_CHARS},
                    {"type": "null"},
                ]
            },
            "stream_format": {"enum": [*speech.STREAM_FORMATS, None]},
            "seed": job_request(settings)["properties"]["seed"],
            "cache": {"type": "boolean"},
            "stream_start": job_request(settings)["properties"]["stream_start"],
            "stream_check": job_request(settings)["properties"]["stream_check"],
            # Kokoro-FastAPI's (web/schemas/openai.py: KOKORO).
            "stream": _nullable({"type": "boolean"}),
            "lang_code": _nullable({"type": "string", "maxLength": 8}),
            "volume_multiplier": _nullable(
                {
                    "type": "number",
                    "exclusiveMinimum": speech.VOLUME_RANGE[0],
                    "maximum": speech.VOLUME_RANGE[1],
                }
            ),
            "return_download_link": _nullable({"type": "boolean"}),
            "normalization_options": _nullable(
                {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {n: {"type": "boolean"} for n in speech.KOKORO_NORMALIZATION},
                }
            ),
            "download_format": _nullable({"type": "string", "maxLength": 8}),
        },
    }


def captioned_request(settings: Settings) -> Schema:
    schema = speech_request(settings)
    properties = schema["properties"]
    properties.pop("stream_format")  # it comes whole
    properties["return_timestamps"] = {"type": "boolean", "default": True}
    # Only false (it comes whole): a boolean, not `const: false`, which generators choke on.
    properties["stream"] = {"type": "boolean", "default": False, "description": "false only"}
    properties["lang_code"] = {"type": "string", "description": "accepted; the text decides"}
    assert set(properties) >= set(speech.CAPTIONED_EXTENSIONS)
    return schema


def elevenlabs_request(settings: Settings) -> Schema:
    schema = SpeechBody.model_json_schema()
    schema.pop("title", None)
    schema["properties"]["text"]["maxLength"] = settings.limits.max_text_chars
    # Its one nested model, in place (a body's schema has no $defs of its own in OpenAPI).
    voice_settings = schema.pop("$defs")["VoiceSettings"]
    voice_settings.pop("title", None)
    schema["properties"]["voice_settings"]["anyOf"][0] = voice_settings
    return schema


def legacy_request(settings: Settings) -> Schema:
    schema = LegacyRequest.model_json_schema()
    schema.pop("title", None)
    text = schema["properties"]["text"]  # a server's lower CHATTTS_MAX_TEXT_CHARS holds too
    text["maxLength"] = min(text["maxLength"], settings.limits.max_text_chars)
    return schema


def _voice_fields() -> dict[str, Schema]:
    limits = registration.FIELD_LIMITS  # the limits registrations are checked against
    return {
        "name": {"type": "string", "pattern": f"^{registration.NAME.pattern}$"},
        "language": {"type": "string", "maxLength": limits["language"]},
        "gender": {"type": "string", "maxLength": limits["gender"]},
        "description": {"type": "string", "maxLength": limits["description"]},
    }


def voice_json(settings: Settings) -> Schema:
    properties = {**_voice_fields(), "embedding": {"type": "string", "minLength": 1}}
    assert set(properties) == set(registration.JSON_FIELDS)
    return {
        "type": "object",
        "required": ["name", "embedding"],
        "properties": properties,
        "additionalProperties": False,
    }


def voice_form(settings: Settings) -> Schema:
    properties = {
        **_voice_fields(),
        "transcript": {"type": "string"},
        "audio": {
            "type": "string",
            "contentMediaType": "audio/*",
            "description": (
                f"1-20 s, WAV, FLAC, Ogg or MP3, up to {registration.MAX_RECORDING_BYTES} bytes"
            ),
        },
    }
    assert set(properties) == set(registration.FORM_FIELDS)
    return {"type": "object", "required": ["name", "transcript", "audio"], "properties": properties}


# -- the operators' console (web/schemas/admin.py) ----------------------------------------------


def admin_key(settings: Settings) -> Schema:
    key = {"type": "string", "minLength": 1, "maxLength": admin.MAX_KEY_CHARS}
    return {"type": "object", "required": ["key"], "properties": {"key": key}}


def pause_request(settings: Settings) -> Schema:
    """Both optional (the body too): the reason refused clients read, their Retry-After."""
    after = {"type": "integer", "minimum": 1, "maximum": admin.MAX_PAUSE_RETRY_AFTER_S}
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "reason": {"type": "string", "maxLength": admin.MAX_REASON_CHARS},
            "retry_after_s": {**after, "default": admin.PAUSE_RETRY_AFTER_S},
        },
    }


def job_ids(settings: Settings) -> Schema:
    """`{"ids": [...]}`, or `{"all": true}` (a boolean here: generators choke on `const`)."""
    ids = {
        "type": "array",
        "minItems": 1,
        "maxItems": admin.MAX_IDS,
        "items": {"type": "string", "pattern": "^[0-9a-f]{32}$"},
    }
    return {
        "type": "object",
        "properties": {"ids": ids, "all": {"type": "boolean", "description": "true: every one"}},
    }
