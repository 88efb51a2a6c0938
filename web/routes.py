"""Every route of the web tier, named (handlers build URLs with `app.router[name].url_for`)."""

from __future__ import annotations

import logging
from pathlib import Path

from aiohttp import web
from aiohttp.typedefs import Handler

from web.middlewares.error_handling import expect_handler
from web.views.compat import captions, chatttsui, elevenlabs_speech, legacy, models, openai
from web.views.console import fleet
from web.views.console import jobs as console_jobs
from web.views.console import page as console_page
from web.views.jobs import audio, callbacks, chunks, events, jobs, subtitles, ws
from web.views.live import elevenlabs, speech_stream
from web.views.live import session as live_session
from web.views.service import api_docs, health, metrics, page
from web.views.voices import listing, registry

log = logging.getLogger("chattts_online.web")


def setup_routes(app: web.Application, static_dir: Path) -> None:
    r = app.router

    # Every route answers an unknown `Expect` with a JSON 417 (aiohttp's default answers a 500 to
    # one that is not UTF-8): aiohttp takes the handler per route, and has no app-wide setting.
    def get(path: str, handler: Handler, name: str, *, head: bool = True) -> None:
        r.add_get(path, handler, name=name, allow_head=head, expect_handler=expect_handler)

    def stream(path: str, handler: Handler, name: str) -> None:
        """A long-lived answer (SSE, WebSocket): no HEAD."""
        get(path, handler, name, head=False)

    def post(path: str, handler: Handler, name: str) -> None:
        r.add_post(path, handler, name=name, expect_handler=expect_handler)

    def methods(path: str, name: str, **handlers: Handler) -> None:
        resource = r.add_resource(path, name=name)
        for method, handler in handlers.items():
            resource.add_route(method, handler, expect_handler=expect_handler)

    get("/", page.index, "index")
    get("/openapi.json", api_docs.openapi_json, "openapi")
    get("/docs", api_docs.api_docs, "api_docs")

    methods("/v1/tts/jobs", "jobs", POST=jobs.create_job, GET=jobs.list_jobs)
    methods("/v1/tts/jobs/{job_id}", "job", GET=jobs.get_job, DELETE=jobs.delete_job)
    get("/v1/tts/jobs/{job_id}/audio", audio.job_audio, "job_audio")
    get(r"/v1/tts/jobs/{job_id}/segments/{n:\d{1,6}}", audio.job_segment, "job_segment")
    get("/v1/tts/jobs/{job_id}/subtitles", subtitles.job_subtitles, "job_subtitles")
    stream("/v1/tts/jobs/{job_id}/stream", chunks.job_stream, "job_stream")
    stream("/v1/tts/jobs/{job_id}/events", events.job_events, "job_events")
    stream("/v1/events", events.client_events, "client_events")
    stream("/v1/ws", ws.websocket, "ws")
    stream("/v1/live", live_session.live, "live")
    # ElevenLabs' text-in WebSockets (its voice-agent plugins connect here).
    stream(
        "/v1/text-to-speech/{voice_id}/multi-stream-input",
        elevenlabs.multi_stream_input,
        "elevenlabs_multi_stream_input",
    )
    stream(
        "/v1/text-to-speech/{voice_id}/stream-input",
        elevenlabs.stream_input,
        "elevenlabs_stream_input",
    )
    for path, name in elevenlabs_speech.ROUTES:  # ElevenLabs' text-to-speech HTTP API
        post(f"/v1/text-to-speech/{{voice_id}}{path}", elevenlabs_speech.speech, name)
    get("/v1/voices", listing.list_voices, "voices")
    get("/v2/voices", listing.search_voices, "voices_search")
    post("/v1/voices", registry.register_voice, "voices_register")
    methods("/v1/voices/{name}", "voice", GET=listing.get_voice, DELETE=registry.delete_voice)
    post("/v1/audio/speech", openai.speech, "openai_speech")
    stream("/v1/audio/speech/stream", speech_stream.speech_stream, "speech_stream")
    post("/dev/captioned_speech", captions.captioned_speech, "captioned_speech")
    get("/v1/models", models.list_models, "openai_models")
    get("/v1/models/{model_id}", models.get_model, "openai_model")
    get("/v1/audio/models", models.list_audio_models, "openai_audio_models")
    get("/v1/audio/voices", models.list_audio_voices, "openai_voices")
    get("/v1/callbacks/secret", callbacks.callback_secret, "callback_secret")

    methods("/tts", "chatttsui_tts", GET=chatttsui.tts, POST=chatttsui.tts)  # ChatTTS-ui's API
    post("/tts/submit", legacy.submit, "legacy_submit")
    get("/tts/query/{task_id}", legacy.query, "legacy_query")

    get("/healthz", health.healthz, "healthz")
    get("/readyz", health.readyz, "readyz")
    get("/metrics", metrics.metrics_view, "metrics")

    # The operators' console (CHATTTS_ADMIN_KEYS): its page, its session, its API.
    get("/admin", console_page.page, "admin")
    methods(
        "/admin/session", "admin_session", POST=console_page.sign_in, DELETE=console_page.sign_out
    )
    stream("/admin/v1/live", console_page.live, "admin_live")
    get("/admin/v1/queue", fleet.get_queue, "admin_queue")
    post("/admin/v1/queue/pause", fleet.pause_queue, "admin_pause")
    post("/admin/v1/queue/resume", fleet.resume_queue, "admin_resume")
    get("/admin/v1/workers", fleet.list_workers, "admin_workers")
    post("/admin/v1/workers/{name}/drain", fleet.drain_worker, "admin_drain")
    get("/admin/v1/usage", fleet.usage, "admin_usage")
    get("/admin/v1/audit", fleet.audit, "admin_audit")
    get("/admin/v1/jobs", console_jobs.search_jobs, "admin_jobs")
    get("/admin/v1/jobs/{job_id}", console_jobs.job_record, "admin_job")
    get("/admin/v1/dlq", console_jobs.dead_letters, "admin_dlq")
    post("/admin/v1/dlq/requeue", console_jobs.requeue_many, "admin_requeue")
    post("/admin/v1/dlq/purge", console_jobs.purge, "admin_purge")
    post("/admin/v1/dlq/{job_id}/requeue", console_jobs.requeue_one, "admin_requeue_one")

    if static_dir.is_dir():
        r.add_static("/static", static_dir, name="static", expect_handler=expect_handler)
    else:
        log.warning("no static directory at %s: the page will have no script or style", static_dir)
