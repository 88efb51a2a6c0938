"""Every route's entry in the OpenAPI document (web/views/service/api_docs.py), by (method, route
name): its summary, tag, answers, and its body's and parameters' schemas, from the types and
constants the service validates and answers with."""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST

from core.audio.catalog import CATALOG, ELEVENLABS_NAMES
from core.infra.settings import Settings
from core.queue.job import JobState
from core.text.subtitles import SUBTITLE_FORMATS
from web.schemas import answers, chatttsui
from web.schemas import compat_answers as compat
from web.schemas import console_answers as console
from web.schemas import openai as speech
from web.schemas.admin import MAX_PAGE, MAX_USAGE_DAYS
from web.schemas.jobs import MAX_LIST_LIMIT
from web.schemas.openapi_answers import (
    AUDIO,
    HTML,
    SSE,
    Operation,
    empty,
    errors,
    json,
    legacy_errors,
    media,
)
from web.schemas.openapi_bodies import (
    Schema,
    admin_key,
    captioned_request,
    elevenlabs_request,
    job_ids,
    job_request,
    legacy_request,
    pause_request,
    speech_request,
    voice_form,
    voice_json,
)

CURSOR = ("last_event_id", {"type": "string"}, "resume after this event id (the SSE id)")
DOWNLOAD = ("download", {"type": "string"}, "1: as an attachment")
STATES = [state.value for state in JobState]
PAGE = (200, (HTML,), "")
WEBSOCKET = (
    empty(101, "Switching Protocols: the WebSocket; its frames are in docs/api.md"),
    *errors(400, 403, 429),
)
# A file's answers: the bytes, a part of them (Range), unchanged (If-None-Match), elsewhere.
AUDIO_FILE = (
    media(200, AUDIO, "the audio, in the job's format", "ETag"),
    media(206, AUDIO, "the Range asked for", "Content-Range"),
    empty(304, "unchanged since the ETag sent in If-None-Match"),
    *errors(404, 409, 416, 429, 503),
)
ADMIN = errors(401, 403)  # no admin key or session; a wrong one, or the console off

# ElevenLabs' query parameters this service reads (web/views/live/elevenlabs.py).
ELEVENLABS_QUERY = (
    ("output_format", {"enum": ELEVENLABS_NAMES}, "mp3_44100_128 by default"),
    ("model_id", {"type": "string"}, "ignored, except eleven_v3*/eleven_v4*: refused"),
    ("inactivity_timeout", {"type": "number", "minimum": 1, "maximum": 180}, "a context's idle s"),
    ("auto_mode", {"enum": ["true", "false"]}, "true: each text frame is spoken at once"),
    ("sync_alignment", {"enum": ["true", "false"]}, "true: times from the context's start"),
)
ELEVENLABS_AUDIO = ("audio/mpeg", "audio/pcm", "audio/opus", "audio/basic")
PAGE_QUERY = (  # a console list's page: its size, and where the page before ended
    ("limit", {"type": "integer", "minimum": 1, "maximum": MAX_PAGE}, ""),
    ("cursor", {"type": "string"}, "next_cursor of the page before"),
)
SEGMENT_NUMBER = ("n", {"type": "integer", "minimum": 1, "maximum": 999_999})

# ChatTTS-ui's /tts fields (web/schemas/chatttsui.py), all strings as its clients send them; its
# answer (or, with wav=1, the WAV itself), and its errors as {"code": 1} with HTTP 200.
CHATTTSUI_QUERY = tuple((name, {"type": "string"}, "") for name in chatttsui.FIELDS)
CHATTTSUI_ANSWERS = (
    json(200, compat.TtsAnswer | compat.TtsFailure, "the audio made, or {code: 1, msg}"),
    media(200, ("audio/x-wav",), "with wav=1: the WAV itself"),
)


def chatttsui_form(_: Settings) -> Schema:
    return {"type": "object", "properties": {name: {"type": "string"} for name in chatttsui.FIELDS}}


# Every route of web/routes.py, by (method, route name) (a test checks that none is missing): its
# summary, tag, answers, and its body's and parameters' schemas. An answer names the type the
# view builds its body as, so that the document and the answers cannot drift apart:
#
#     (json(200, answers.VoiceList), *errors(404))  # a VoiceList, or 404 in the error shape
#
# json(status, T): a JSON body, T a TypedDict of web/schemas/*answers.py that the view annotates
# its body with; media(status, types, what): audio or text; empty(status, what); errors(*s) and
# legacy_errors(*s): the error shapes. What every route of its kind may answer (a body's 413, an
# API route's 503) is added by common_errors. Tests check real answers against the document.
OPERATIONS: dict[tuple[str, str], Operation] = {
    ("GET", "index"): Operation("The demo page", "page", (media(*PAGE),)),
    # (Both made once per process: 429 while an address has too many files being made, 503
    # while the process has.)
    ("GET", "api_docs"): Operation("This page", "page", (media(*PAGE), *errors(429, 503))),
    ("GET", "openapi"): Operation(
        "This document", "page", (json(200, Schema, "OpenAPI 3.1"), *errors(429, 503))
    ),
    ("POST", "jobs"): Operation(
        "Submit a job",
        "jobs",
        (
            json(202, answers.SubmittedJob, headers=("Location",)),
            *errors(400, 403, 413, 422, 429, 503),
        ),
        body=job_request,
    ),
    ("GET", "jobs"): Operation(
        "My jobs, newest first",
        "jobs",
        (json(200, answers.JobPage), *errors(400)),
        query=(
            ("state", {"type": "string"}, f"comma-separated: {', '.join(STATES)}"),
            ("limit", {"type": "integer", "minimum": 1, "maximum": MAX_LIST_LIMIT}, ""),
            ("cursor", {"type": "string"}, "next_cursor of the page before"),
        ),
    ),
    ("GET", "job"): Operation(
        "A job's snapshot", "jobs", (json(200, answers.JobView), *errors(404))
    ),
    ("DELETE", "job"): Operation(
        "Cancel a job", "jobs", (json(202, answers.Cancelling), *errors(403, 404, 409))
    ),
    ("GET", "job_audio"): Operation(
        "A job's audio (Range, ETag)",
        "audio",
        (*AUDIO_FILE, empty(307, "fetch it from the audio store: Location", "Location")),
        query=(DOWNLOAD,),
    ),
    ("GET", "job_segment"): Operation(
        "One segment's audio, as soon as it is made",
        "audio",
        (*AUDIO_FILE, *errors(500)),  # a document's part whose encoder crashed
        path=(SEGMENT_NUMBER,),
    ),
    ("GET", "job_subtitles"): Operation(
        "Subtitles and word times",
        "audio",
        (
            media(200, ("application/x-subrip", "text/vtt"), "SRT or WebVTT"),
            json(200, answers.TimedText, "SRT, WebVTT, or JSON: cues and words' times"),
            *errors(400, 404, 409, 429),
        ),
        query=(("format", {"enum": list(SUBTITLE_FORMATS)}, "srt by default"), DOWNLOAD),
    ),
    ("GET", "job_stream"): Operation(
        "PCM while it is made (resumable)",
        "audio",
        (
            media(200, (CATALOG["pcm"].mime,), "16-bit mono PCM at X-Sample-Rate", "X-Sample-Rate"),
            *errors(400, 404, 409, 416, 429, 500, 503),
        ),
        query=(("offset", {"type": "integer", "minimum": 0}, "bytes already read (even)"),),
    ),
    ("GET", "job_events"): Operation(
        "A job's events (SSE)",
        "events",
        (
            media(200, (SSE,), "replayed, then live; it ends after the job's last event"),
            empty(204, "the job ended and the cursor is past its last event"),
            *errors(400, 404, 429),
        ),
        query=(CURSOR,),
    ),
    ("GET", "client_events"): Operation(
        "All my jobs' events (SSE)",
        "events",
        (media(200, (SSE,), "replayed, then live"), *errors(400, 429)),
        query=(CURSOR,),
    ),
    ("GET", "ws"): Operation("Submit and follow over a WebSocket", "events", WEBSOCKET),
    ("GET", "live"): Operation(
        "A live session: text in as it is written, audio out (WebSocket)", "live", WEBSOCKET
    ),
    ("GET", "speech_stream"): Operation("vLLM-Omni's text-in speech WebSocket", "live", WEBSOCKET),
    ("GET", "elevenlabs_multi_stream_input"): Operation(
        "ElevenLabs' multi-context text-in WebSocket (voice-agent plugins)",
        "live",
        WEBSOCKET,
        query=ELEVENLABS_QUERY,
    ),
    ("GET", "elevenlabs_stream_input"): Operation(
        "ElevenLabs' single-context text-in WebSocket", "live", WEBSOCKET, query=ELEVENLABS_QUERY
    ),
    **{
        ("POST", name): Operation(
            f"ElevenLabs' text to speech{summary}",
            "elevenlabs",
            (answer, *errors(400, 422, 429, 500, 503)),
            body=elevenlabs_request,
            query=ELEVENLABS_QUERY[:1],
        )
        for name, summary, answer in (
            ("elevenlabs_speech", "", media(200, ELEVENLABS_AUDIO, "the audio")),
            ("elevenlabs_speech_stream", ", streamed", media(200, ELEVENLABS_AUDIO, "as made")),
            ("elevenlabs_speech_timed", ", timed", json(200, compat.TimedSpeech)),
            (
                "elevenlabs_speech_stream_timed",
                ", timed and streamed",
                media(200, ("text/plain",), "lines of JSON, a TimedSpeech each"),
            ),
        )
    },
    ("GET", "voices"): Operation("The voices", "voices", (json(200, answers.VoiceList),)),
    ("GET", "voices_search"): Operation(
        "Voices found, a page at a time (ElevenLabs' shape)",
        "voices",
        (json(200, answers.VoicePage), *errors(400)),
        query=(
            ("search", {"type": "string"}, "in a voice's name, description and labels"),
            ("category", {"type": "string"}, "premade or cloned"),
            ("voice_type", {"type": "string"}, "as category"),
            ("page_size", {"type": "integer", "minimum": 1, "maximum": 100}, "10 by default"),
            ("next_page_token", {"type": "string"}, "next_page_token of the page before"),
        ),
    ),
    ("POST", "voices_register"): Operation(
        "Register a voice",
        "voices",
        (json(201, answers.Voice, headers=("Location",)), *errors(409, 422, 429, 503)),
        body=voice_json,
        form=voice_form,
    ),
    ("GET", "voice"): Operation("One voice", "voices", (json(200, answers.Voice), *errors(404))),
    ("DELETE", "voice"): Operation(
        "Delete a registered voice",
        "voices",
        (json(200, answers.VoiceDeleted), *errors(403, 404, 409)),
    ),
    ("POST", "openai_speech"): Operation(
        "OpenAI-compatible speech",
        "openai",
        (
            media(200, [CATALOG[f].mime for f in speech.FORMATS], "the audio (response_format)"),
            media(200, (SSE,), "stream_format sse: speech.audio.delta, speech.audio.done"),
            *errors(400, 429, 500, 503),
        ),
        body=speech_request,
    ),
    ("POST", "captioned_speech"): Operation(
        "Speech with word timestamps (Kokoro's captioned speech)",
        "openai",
        (json(200, compat.CaptionedSpeech), *errors(400, 429, 500, 503)),
        body=captioned_request,
    ),
    ("GET", "openai_models"): Operation(
        "Models (OpenAI's shape)", "openai", (json(200, compat.ModelList),)
    ),
    ("GET", "openai_model"): Operation(
        "One model (OpenAI's shape)", "openai", (json(200, compat.Model), *errors(404))
    ),
    ("GET", "openai_audio_models"): Operation(
        "Speech models (Open WebUI's shape)", "openai", (json(200, compat.AudioModelList),)
    ),
    ("GET", "openai_voices"): Operation(
        "Voices by id and name (Open WebUI's shape)", "openai", (json(200, compat.VoiceNames),)
    ),
    ("GET", "chatttsui_tts"): Operation(
        "Speak (ChatTTS-ui's API: fields in the query string)",
        "chatttsui",
        CHATTTSUI_ANSWERS,
        query=CHATTTSUI_QUERY,
    ),
    ("POST", "chatttsui_tts"): Operation(
        "Speak (ChatTTS-ui's API: fields in a form)",
        "chatttsui",
        CHATTTSUI_ANSWERS,
        form=chatttsui_form,
        urlencoded=chatttsui_form,
    ),
    ("GET", "callback_secret"): Operation(
        "My callbacks' signing secret", "jobs", (json(200, answers.CallbackSecret),)
    ),
    ("POST", "legacy_submit"): Operation(
        "Submit (the previous API)",
        "legacy",
        (json(200, compat.LegacySubmitted), *legacy_errors(422, 429, 503)),
        body=legacy_request,
    ),
    ("GET", "legacy_query"): Operation(
        "Query (the previous API)", "legacy", (json(200, compat.LegacyStatus), *legacy_errors(404))
    ),
    ("GET", "healthz"): Operation("Alive", "operations", (json(200, answers.Health),)),
    ("GET", "readyz"): Operation(
        "Ready: Redis, workers, streams",
        "operations",
        (json(200, answers.Readiness), json(503, answers.Readiness, "not ready")),
    ),
    ("GET", "metrics"): Operation(
        "Prometheus metrics",
        "operations",
        (media(200, (CONTENT_TYPE_LATEST,), "the exposition format"), *errors(403)),
    ),
    # The operators' console: an admin key (CHATTTS_ADMIN_KEYS) as a bearer token, or a session.
    ("GET", "admin"): Operation("The console page", "admin", (media(*PAGE),)),
    ("POST", "admin_session"): Operation(
        "Sign in to the console with an admin key",
        "admin",
        (json(200, console.SignedIn), *errors(403)),
        body=admin_key,
    ),
    ("DELETE", "admin_session"): Operation(
        "Sign out of the console", "admin", (json(200, console.SignedIn),)
    ),
    ("GET", "admin_live"): Operation(
        "The console's live view (SSE)",
        "admin",
        (media(200, (SSE,), "a `console` event a second"), *ADMIN, *errors(429)),
    ),
    ("GET", "admin_queue"): Operation(
        "The queue at a glance", "admin", (json(200, console.QueueView), *ADMIN)
    ),
    ("POST", "admin_pause"): Operation(
        "Pause intake (503 paused)",
        "admin",
        (json(200, console.PauseState), *ADMIN),
        body=pause_request,
        optional_body=True,
    ),
    ("POST", "admin_resume"): Operation(
        "Resume intake", "admin", (json(200, console.PauseState), *ADMIN)
    ),
    ("GET", "admin_workers"): Operation(
        "Live workers", "admin", (json(200, console.Workers), *ADMIN)
    ),
    ("POST", "admin_drain"): Operation(
        "Drain a worker", "admin", (json(202, console.Draining), *ADMIN, *errors(404))
    ),
    ("GET", "admin_usage"): Operation(
        "Usage per day and client",
        "admin",
        (json(200, console.Usage), media(200, ("text/csv",), "format=csv"), *ADMIN, *errors(400)),
        query=(
            ("days", {"type": "integer", "minimum": 1, "maximum": MAX_USAGE_DAYS}, ""),
            ("format", {"enum": ["json", "csv"]}, ""),
        ),
    ),
    ("GET", "admin_audit"): Operation(
        "The operators' actions",
        "admin",
        (json(200, console.AuditPage), *ADMIN, *errors(400)),
        query=PAGE_QUERY,
    ),
    ("GET", "admin_jobs"): Operation(
        "Search jobs",
        "admin",
        (json(200, console.ConsoleJobPage), *ADMIN, *errors(400)),
        query=(
            ("state", {"type": "string"}, f"comma-separated: {', '.join(STATES)}"),
            ("client", {"type": "string"}, "a client id, or the address or key it is fair to"),
            ("voice", {"type": "string"}, ""),
            ("since", {"type": "number"}, "Unix seconds"),
            ("until", {"type": "number"}, "Unix seconds"),
            ("text", {"type": "string"}, "a fragment of the text, any case"),
            ("limit", {"type": "integer", "minimum": 1, "maximum": MAX_PAGE}, ""),
            ("cursor", {"type": "number"}, "next_cursor of the page before"),
        ),
    ),
    ("GET", "admin_job"): Operation(
        "A job's whole record", "admin", (json(200, console.JobRecord), *ADMIN, *errors(404))
    ),
    ("GET", "admin_dlq"): Operation(
        "Dead letters, newest first",
        "admin",
        (json(200, console.DeadLetterPage), *ADMIN, *errors(400)),
        query=PAGE_QUERY,
    ),
    ("POST", "admin_requeue"): Operation(
        "Requeue dead jobs ({ids} or {all})",
        "admin",
        (json(200, console.RequeueResults), *ADMIN, *errors(400)),
        body=job_ids,
    ),
    ("POST", "admin_requeue_one"): Operation(
        "Requeue a dead job", "admin", (json(200, console.Requeued), *ADMIN, *errors(404, 409))
    ),
    ("POST", "admin_purge"): Operation(
        "Purge dead letters ({ids} or {all})",
        "admin",
        (json(200, console.Purged), *ADMIN, *errors(400)),
        body=job_ids,
    ),
}
