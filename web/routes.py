"""Every route of the web tier, named (handlers build URLs with `app.router[name].url_for`)."""

from __future__ import annotations

import logging
from pathlib import Path

from aiohttp import web

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
    e = expect_handler
    r.add_get("/", page.index, name="index", expect_handler=e)
    r.add_get("/openapi.json", api_docs.openapi_json, name="openapi", expect_handler=e)
    r.add_get("/docs", api_docs.api_docs, name="api_docs", expect_handler=e)

    job_list = r.add_resource("/v1/tts/jobs", name="jobs")
    job_list.add_route("POST", jobs.create_job, expect_handler=e)
    job_list.add_route("GET", jobs.list_jobs, expect_handler=e)
    job = r.add_resource("/v1/tts/jobs/{job_id}", name="job")
    job.add_route("GET", jobs.get_job, expect_handler=e)
    job.add_route("DELETE", jobs.delete_job, expect_handler=e)
    r.add_get("/v1/tts/jobs/{job_id}/audio", audio.job_audio, name="job_audio", expect_handler=e)
    r.add_get(
        r"/v1/tts/jobs/{job_id}/segments/{n:\d{1,6}}",
        audio.job_segment,
        name="job_segment",
        expect_handler=e,
    )
    r.add_get(
        "/v1/tts/jobs/{job_id}/subtitles",
        subtitles.job_subtitles,
        name="job_subtitles",
        expect_handler=e,
    )
    r.add_get(
        "/v1/tts/jobs/{job_id}/stream",
        chunks.job_stream,
        name="job_stream",
        allow_head=False,
        expect_handler=e,
    )
    r.add_get(
        "/v1/tts/jobs/{job_id}/events",
        events.job_events,
        name="job_events",
        allow_head=False,
        expect_handler=e,
    )
    r.add_get(
        "/v1/events", events.client_events, name="client_events", allow_head=False, expect_handler=e
    )
    r.add_get("/v1/ws", ws.websocket, name="ws", allow_head=False, expect_handler=e)
    r.add_get("/v1/live", live_session.live, name="live", allow_head=False, expect_handler=e)
    # ElevenLabs' text-in WebSockets (its voice-agent plugins connect here).
    r.add_get(
        "/v1/text-to-speech/{voice_id}/multi-stream-input",
        elevenlabs.multi_stream_input,
        name="elevenlabs_multi_stream_input",
        allow_head=False,
        expect_handler=e,
    )
    r.add_get(
        "/v1/text-to-speech/{voice_id}/stream-input",
        elevenlabs.stream_input,
        name="elevenlabs_stream_input",
        allow_head=False,
        expect_handler=e,
    )
    for path, name in elevenlabs_speech.ROUTES:  # ElevenLabs' text-to-speech HTTP API
        r.add_post(f"/v1/text-to-speech/{{voice_id}}{path}", elevenlabs_speech.speech, name=name)
    r.add_get("/v1/voices", listing.list_voices, name="voices", expect_handler=e)
    r.add_get("/v2/voices", listing.search_voices, name="voices_search", expect_handler=e)
    r.add_post("/v1/voices", registry.register_voice, name="voices_register", expect_handler=e)
    voice = r.add_resource("/v1/voices/{name}", name="voice")
    voice.add_route("GET", listing.get_voice, expect_handler=e)
    voice.add_route("DELETE", registry.delete_voice, expect_handler=e)
    r.add_post("/v1/audio/speech", openai.speech, name="openai_speech", expect_handler=e)
    r.add_get(
        "/v1/audio/speech/stream",
        speech_stream.speech_stream,
        name="speech_stream",
        allow_head=False,
        expect_handler=e,
    )
    r.add_post(
        "/dev/captioned_speech",
        captions.captioned_speech,
        name="captioned_speech",
        expect_handler=e,
    )
    r.add_get("/v1/models", models.list_models, name="openai_models", expect_handler=e)
    r.add_get("/v1/models/{model_id}", models.get_model, name="openai_model", expect_handler=e)
    r.add_get("/v1/audio/models", models.list_audio_models, name="openai_audio_models")
    r.add_get("/v1/audio/voices", models.list_audio_voices, name="openai_voices")
    r.add_get(
        "/v1/callbacks/secret", callbacks.callback_secret, name="callback_secret", expect_handler=e
    )

    chatttsui_tts = r.add_resource("/tts", name="chatttsui_tts")  # ChatTTS-ui's API
    chatttsui_tts.add_route("GET", chatttsui.tts, expect_handler=e)
    chatttsui_tts.add_route("POST", chatttsui.tts, expect_handler=e)
    r.add_post("/tts/submit", legacy.submit, name="legacy_submit", expect_handler=e)
    r.add_get("/tts/query/{task_id}", legacy.query, name="legacy_query", expect_handler=e)

    r.add_get("/healthz", health.healthz, name="healthz", expect_handler=e)
    r.add_get("/readyz", health.readyz, name="readyz", expect_handler=e)
    r.add_get("/metrics", metrics.metrics_view, name="metrics", expect_handler=e)

    # The operators' console (CHATTTS_ADMIN_KEYS): its page, its session, its API.
    r.add_get("/admin", console_page.page, name="admin", expect_handler=e)
    admin_session = r.add_resource("/admin/session", name="admin_session")
    admin_session.add_route("POST", console_page.sign_in, expect_handler=e)
    admin_session.add_route("DELETE", console_page.sign_out, expect_handler=e)
    r.add_get(
        "/admin/v1/live", console_page.live, name="admin_live", allow_head=False, expect_handler=e
    )
    r.add_get("/admin/v1/queue", fleet.get_queue, name="admin_queue", expect_handler=e)
    r.add_post("/admin/v1/queue/pause", fleet.pause_queue, name="admin_pause", expect_handler=e)
    r.add_post("/admin/v1/queue/resume", fleet.resume_queue, name="admin_resume", expect_handler=e)
    r.add_get("/admin/v1/workers", fleet.list_workers, name="admin_workers", expect_handler=e)
    r.add_post(
        "/admin/v1/workers/{name}/drain", fleet.drain_worker, name="admin_drain", expect_handler=e
    )
    r.add_get("/admin/v1/usage", fleet.usage, name="admin_usage", expect_handler=e)
    r.add_get("/admin/v1/audit", fleet.audit, name="admin_audit", expect_handler=e)
    r.add_get("/admin/v1/jobs", console_jobs.search_jobs, name="admin_jobs", expect_handler=e)
    r.add_get(
        "/admin/v1/jobs/{job_id}", console_jobs.job_record, name="admin_job", expect_handler=e
    )
    r.add_get("/admin/v1/dlq", console_jobs.dead_letters, name="admin_dlq", expect_handler=e)
    r.add_post(
        "/admin/v1/dlq/requeue", console_jobs.requeue_many, name="admin_requeue", expect_handler=e
    )
    r.add_post("/admin/v1/dlq/purge", console_jobs.purge, name="admin_purge", expect_handler=e)
    r.add_post(
        "/admin/v1/dlq/{job_id}/requeue",
        console_jobs.requeue_one,
        name="admin_requeue_one",
        expect_handler=e,
    )

    if static_dir.is_dir():
        r.add_static("/static", static_dir, name="static", expect_handler=e)
    else:
        log.warning("no static directory at %s: the page will have no script or style", static_dir)
