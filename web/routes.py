"""Every route of the web tier, named (handlers build URLs with `app.router[name].url_for`)."""

from __future__ import annotations

import logging
from pathlib import Path

from aiohttp import web

from web.middlewares.error_handling import expect_handler
from web.views import (
    audio,
    callbacks,
    chunks,
    events,
    health,
    jobs,
    legacy,
    metrics,
    openai,
    page,
    subtitles,
    voices,
    ws,
)

log = logging.getLogger("chattts_online.web")


def setup_routes(app: web.Application, static_dir: Path) -> None:
    r = app.router
    # Every route answers an unknown `Expect` with a JSON 417 (aiohttp's default answers a 500 to
    # one that is not UTF-8): aiohttp takes the handler per route, and has no app-wide setting.
    e = expect_handler
    r.add_get("/", page.index, name="index", expect_handler=e)

    r.add_post("/v1/tts/jobs", jobs.create_job, name="jobs", expect_handler=e)
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
    r.add_get("/v1/voices", voices.list_voices, name="voices", expect_handler=e)
    r.add_post("/v1/voices", voices.register_voice, name="voices_register", expect_handler=e)
    voice = r.add_resource("/v1/voices/{name}", name="voice")
    voice.add_route("GET", voices.get_voice, expect_handler=e)
    voice.add_route("DELETE", voices.delete_voice, expect_handler=e)
    r.add_post("/v1/audio/speech", openai.speech, name="openai_speech", expect_handler=e)
    r.add_get(
        "/v1/callbacks/secret", callbacks.callback_secret, name="callback_secret", expect_handler=e
    )

    r.add_post("/tts/submit", legacy.submit, name="legacy_submit", expect_handler=e)
    r.add_get("/tts/query/{task_id}", legacy.query, name="legacy_query", expect_handler=e)

    r.add_get("/healthz", health.healthz, name="healthz", expect_handler=e)
    r.add_get("/readyz", health.readyz, name="readyz", expect_handler=e)
    r.add_get("/metrics", metrics.metrics_view, name="metrics", expect_handler=e)

    if static_dir.is_dir():
        r.add_static("/static", static_dir, name="static", expect_handler=e)
    else:
        log.warning("no static directory at %s: the page will have no script or style", static_dir)
