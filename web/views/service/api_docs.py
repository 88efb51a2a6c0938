"""`/openapi.json`: the OpenAPI 3.1 document of every route, built from the router, the request
models and the validators' own constants (never a hand-kept copy); `/docs`: it as a page.

Each route of `web/routes.py` has an entry in `OPERATIONS` (its test checks that none is
missing): its summary, its parameters and its body's schema. A body's schema comes from the
pydantic model that validates it (`SynthesisRequest`, `LegacyRequest`) or, where a body is
validated by hand (OpenAI's, a voice's), from the constants web/schemas checks it against. Both
are made once per process and kept (web/derived.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp_jinja2
import orjson
from aiohttp import web

from core.infra.settings import Settings
from core.queue.job import JobState
from web.appkeys import DERIVED, SETTINGS
from web.live.elevenlabs_audio import supported_formats
from web.monitors.memory import address
from web.replies.timings import SUBTITLE_FORMATS
from web.schemas import chatttsui
from web.schemas.jobs import MAX_LIST_LIMIT
from web.schemas.openapi_bodies import (
    Schema,
    captioned_request,
    job_request,
    legacy_request,
    speech_request,
    voice_form,
    voice_json,
)

JSON = "application/json"


@dataclass(frozen=True)
class Operation:
    summary: str
    tag: str
    body: Callable[[Settings], Schema] | None = None  # the JSON request body's schema
    query: tuple[tuple[str, Schema, str], ...] = ()  # (name, schema, description)
    ok: tuple[int, str, str] = (200, JSON, "")  # (status, media type, description)
    form: Callable[[Settings], Schema] | None = None  # a multipart/form-data body's schema
    urlencoded: Callable[[Settings], Schema] | None = None  # an urlencoded form's schema
    extra: dict[str, Any] = field(default_factory=dict)


CURSOR = ("last_event_id", {"type": "string"}, "resume after this event id (the SSE id)")
DOWNLOAD = ("download", {"type": "string"}, "1: as an attachment")
STATES = [state.value for state in JobState]

# ElevenLabs' query parameters this service reads (web/views/live/elevenlabs.py).
ELEVENLABS_QUERY = (
    ("output_format", {"enum": supported_formats()}, "mp3_44100_128 by default"),
    ("model_id", {"type": "string"}, "ignored, except eleven_v3*/eleven_v4*: refused"),
    ("inactivity_timeout", {"type": "number", "minimum": 1, "maximum": 180}, "a context's idle s"),
    ("auto_mode", {"enum": ["true", "false"]}, "true: each text frame is spoken at once"),
    ("sync_alignment", {"enum": ["true", "false"]}, "true: times from the context's start"),
)

# ChatTTS-ui's /tts fields (web/schemas/chatttsui.py), all strings as its clients send them.
CHATTTSUI_QUERY = tuple((name, {"type": "string"}, "") for name in chatttsui.FIELDS)


def chatttsui_form(_: Settings) -> Schema:
    return {"type": "object", "properties": {name: {"type": "string"} for name in chatttsui.FIELDS}}


OPERATIONS: dict[tuple[str, str], Operation] = {
    ("GET", "index"): Operation("The demo page", "page", ok=(200, "text/html", "")),
    ("GET", "api_docs"): Operation("This page", "page", ok=(200, "text/html", "")),
    ("GET", "openapi"): Operation("This document", "page"),
    ("POST", "jobs"): Operation(
        "Submit a job", "jobs", body=job_request, ok=(202, JSON, "queued: the job's snapshot")
    ),
    ("GET", "jobs"): Operation(
        "My jobs, newest first",
        "jobs",
        query=(
            ("state", {"type": "string"}, f"comma-separated: {', '.join(STATES)}"),
            ("limit", {"type": "integer", "minimum": 1, "maximum": MAX_LIST_LIMIT}, ""),
            ("cursor", {"type": "string"}, "next_cursor of the page before"),
        ),
    ),
    ("GET", "job"): Operation("A job's snapshot", "jobs"),
    ("DELETE", "job"): Operation("Cancel a job", "jobs", ok=(202, JSON, "cancelling")),
    ("GET", "job_audio"): Operation(
        "A job's audio (Range, ETag)", "audio", query=(DOWNLOAD,), ok=(200, "audio/*", "")
    ),
    ("GET", "job_segment"): Operation(
        "One segment's audio, as soon as it is made", "audio", ok=(200, "audio/*", "")
    ),
    ("GET", "job_subtitles"): Operation(
        "Subtitles and word times",
        "audio",
        query=(("format", {"enum": list(SUBTITLE_FORMATS)}, "srt by default"), DOWNLOAD),
        ok=(200, "text/plain", "SRT, WebVTT or JSON"),
    ),
    ("GET", "job_stream"): Operation(
        "PCM while it is made (resumable)",
        "audio",
        query=(("offset", {"type": "integer", "minimum": 0}, "bytes already read"),),
        ok=(200, "audio/L16", ""),
    ),
    ("GET", "job_events"): Operation(
        "A job's events (SSE)", "events", query=(CURSOR,), ok=(200, "text/event-stream", "")
    ),
    ("GET", "client_events"): Operation(
        "All my jobs' events (SSE)", "events", query=(CURSOR,), ok=(200, "text/event-stream", "")
    ),
    ("GET", "ws"): Operation("Submit and follow over a WebSocket", "events", ok=(101, JSON, "")),
    ("GET", "live"): Operation(
        "A live session: text in as it is written, audio out (WebSocket)",
        "live",
        ok=(101, JSON, ""),
    ),
    ("GET", "speech_stream"): Operation(
        "vLLM-Omni's text-in speech WebSocket", "live", ok=(101, JSON, "")
    ),
    ("GET", "elevenlabs_multi_stream_input"): Operation(
        "ElevenLabs' multi-context text-in WebSocket (voice-agent plugins)",
        "live",
        query=ELEVENLABS_QUERY,
        ok=(101, JSON, ""),
    ),
    ("GET", "elevenlabs_stream_input"): Operation(
        "ElevenLabs' single-context text-in WebSocket",
        "live",
        query=ELEVENLABS_QUERY,
        ok=(101, JSON, ""),
    ),
    ("GET", "voices"): Operation("The voices", "voices"),
    ("POST", "voices_register"): Operation(
        "Register a voice", "voices", body=voice_json, form=voice_form, ok=(201, JSON, "")
    ),
    ("GET", "voice"): Operation("One voice", "voices"),
    ("DELETE", "voice"): Operation("Delete a registered voice", "voices", ok=(204, JSON, "")),
    ("POST", "openai_speech"): Operation(
        "OpenAI-compatible speech", "openai", body=speech_request, ok=(200, "audio/*", "")
    ),
    ("POST", "captioned_speech"): Operation(
        "Speech with word timestamps (Kokoro's captioned speech)",
        "openai",
        body=captioned_request,
    ),
    ("GET", "openai_models"): Operation("Models (OpenAI's shape)", "openai"),
    ("GET", "openai_model"): Operation("One model (OpenAI's shape)", "openai"),
    ("GET", "openai_audio_models"): Operation("Speech models (Open WebUI's shape)", "openai"),
    ("GET", "openai_voices"): Operation("Voices by id and name (Open WebUI's shape)", "openai"),
    ("GET", "chatttsui_tts"): Operation(
        "Speak (ChatTTS-ui's API: fields in the query string)", "chatttsui", query=CHATTTSUI_QUERY
    ),
    ("POST", "chatttsui_tts"): Operation(
        "Speak (ChatTTS-ui's API: fields in a form)",
        "chatttsui",
        form=chatttsui_form,
        urlencoded=chatttsui_form,
    ),
    ("GET", "callback_secret"): Operation("My callbacks' signing secret", "jobs"),
    ("POST", "legacy_submit"): Operation(
        "Submit (the previous API)", "legacy", body=legacy_request
    ),
    ("GET", "legacy_query"): Operation("Query (the previous API)", "legacy"),
    ("GET", "healthz"): Operation("Alive", "operations"),
    ("GET", "readyz"): Operation("Ready: Redis, workers, streams", "operations"),
    ("GET", "metrics"): Operation("Prometheus metrics", "operations", ok=(200, "text/plain", "")),
    # The operators' console: an admin key (CHATTTS_ADMIN_KEYS) as a bearer token, or a session.
    ("GET", "admin"): Operation("The console page", "admin", ok=(200, "text/html", "")),
    ("POST", "admin_session"): Operation("Sign in to the console with an admin key", "admin"),
    ("DELETE", "admin_session"): Operation("Sign out of the console", "admin"),
    ("GET", "admin_live"): Operation(
        "The console's live view (SSE)", "admin", ok=(200, "text/event-stream", "")
    ),
    ("GET", "admin_queue"): Operation("The queue at a glance", "admin"),
    ("POST", "admin_pause"): Operation("Pause intake (503 paused)", "admin"),
    ("POST", "admin_resume"): Operation("Resume intake", "admin"),
    ("GET", "admin_workers"): Operation("Live workers", "admin"),
    ("POST", "admin_drain"): Operation("Drain a worker", "admin", ok=(202, JSON, "")),
    ("GET", "admin_usage"): Operation(
        "Usage per day and client",
        "admin",
        query=(
            ("days", {"type": "integer", "minimum": 1}, ""),
            ("format", {"enum": ["json", "csv"]}, ""),
        ),
    ),
    ("GET", "admin_audit"): Operation("The operators' actions", "admin"),
    ("GET", "admin_jobs"): Operation(
        "Search jobs",
        "admin",
        query=(
            ("state", {"type": "string"}, f"comma-separated: {', '.join(STATES)}"),
            ("client", {"type": "string"}, "a client id, or the address or key it is fair to"),
            ("voice", {"type": "string"}, ""),
            ("since", {"type": "number"}, "Unix seconds"),
            ("until", {"type": "number"}, "Unix seconds"),
            ("text", {"type": "string"}, "a fragment of the text, any case"),
            ("limit", {"type": "integer", "minimum": 1}, ""),
            ("cursor", {"type": "number"}, "next_cursor of the page before"),
        ),
    ),
    ("GET", "admin_job"): Operation("A job's whole record", "admin"),
    ("GET", "admin_dlq"): Operation("Dead letters, newest first", "admin"),
    ("POST", "admin_requeue"): Operation("Requeue dead jobs ({ids} or {all})", "admin"),
    ("POST", "admin_requeue_one"): Operation("Requeue a dead job", "admin"),
    ("POST", "admin_purge"): Operation("Purge dead letters ({ids} or {all})", "admin"),
}

ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "code"],
            "properties": {
                "message": {"type": "string", "description": "what to fix"},
                "type": {"type": "string"},
                "code": {"type": "string"},
                "param": {"type": ["string", "null"]},
            },
        }
    },
}


def _operation(method: str, name: str, path: str, op: Operation, settings: Settings) -> Schema:
    out: Schema = {"summary": op.summary, "tags": [op.tag], "operationId": f"{name}_{method}"}
    params = [
        {"name": part[1:-1], "in": "path", "required": True, "schema": {"type": "string"}}
        for part in path.split("/")
        if part.startswith("{")
    ]
    params += [
        {"name": n, "in": "query", "schema": s, **({"description": d} if d else {})}
        for n, s, d in op.query
    ]
    if params:
        out["parameters"] = params
    content: Schema = {}
    if op.body is not None:
        content[JSON] = {"schema": op.body(settings)}
    if op.form is not None:
        content["multipart/form-data"] = {"schema": op.form(settings)}
    if op.urlencoded is not None:
        content["application/x-www-form-urlencoded"] = {"schema": op.urlencoded(settings)}
    if content:
        out["requestBody"] = {"required": True, "content": content}
    status, media, description = op.ok
    out["responses"] = {
        str(status): {"description": description or op.summary, "content": {media: {}}},
        "4XX": {"description": "what to fix", "content": {JSON: {"schema": ERROR}}},
    }
    return out


def _path(resource: Any) -> str:
    """The route's path as OpenAPI writes it: `{n:\\d{1,6}}` becomes `{n}`."""
    info = resource.get_info()
    if "formatter" in info:
        return str(info["formatter"])
    return str(info.get("path") or resource.canonical)


def document(app: web.Application) -> Schema:
    paths: dict[str, Schema] = {}
    for route in app.router.routes():
        resource = route.resource
        if resource is None or route.method == "HEAD" or resource.name in (None, "static"):
            continue
        op = OPERATIONS[(route.method, resource.name)]  # KeyError: a route without its entry
        path = _path(resource)
        paths.setdefault(path, {})[route.method.lower()] = _operation(
            route.method, resource.name, path, op, app[SETTINGS]
        )
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "ChatTTS Online",
            "version": "1",
            "description": "Text to speech over HTTP: jobs, their audio, events and subtitles.",
        },
        "paths": paths,
        "components": {"schemas": {"Error": ERROR}},
    }


async def openapi_json(request: web.Request) -> web.Response:
    return web.Response(body=await _document_bytes(request), content_type="application/json")


async def api_docs(request: web.Request) -> web.StreamResponse:
    derived = request.app[DERIVED]
    page = derived.kept("docs.html")
    if page is None:  # made once: the routes and settings do not change while the app runs
        doc = orjson.loads(await _document_bytes(request))
        operations = [
            {"method": method.upper(), "path": path, **op}
            for path, methods in doc["paths"].items()
            for method, op in methods.items()
        ]
        context = {"operations": operations}
        page = aiohttp_jinja2.render_string("docs.html", request, context).encode()
        derived.put("docs.html", page)
    return web.Response(body=page, content_type="text/html", charset="utf-8")


def _dumped(app: web.Application) -> bytes:
    return orjson.dumps(document(app))


async def _document_bytes(request: web.Request) -> bytes:
    app = request.app
    build = functools.partial(_dumped, app)
    return await app[DERIVED].get("openapi.json", build, address(request))
