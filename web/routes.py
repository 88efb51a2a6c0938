"""Every route of the web tier, named (handlers build URLs with `app.router[name].url_for`)."""

from __future__ import annotations

import logging
from pathlib import Path

from aiohttp import web

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
    r.add_get("/", page.index, name="index")

    r.add_post("/v1/tts/jobs", jobs.create_job, name="jobs")
    job = r.add_resource("/v1/tts/jobs/{job_id}", name="job")
    job.add_route("GET", jobs.get_job)
    job.add_route("DELETE", jobs.delete_job)
    r.add_get("/v1/tts/jobs/{job_id}/audio", audio.job_audio, name="job_audio")
    r.add_get(r"/v1/tts/jobs/{job_id}/segments/{n:\d{1,6}}", audio.job_segment, name="job_segment")
    r.add_get("/v1/tts/jobs/{job_id}/subtitles", subtitles.job_subtitles, name="job_subtitles")
    streaming = {"allow_head": False}
    r.add_get("/v1/tts/jobs/{job_id}/stream", chunks.job_stream, name="job_stream", **streaming)
    r.add_get("/v1/tts/jobs/{job_id}/events", events.job_events, name="job_events", **streaming)
    r.add_get("/v1/events", events.client_events, name="client_events", **streaming)
    r.add_get("/v1/ws", ws.websocket, name="ws", **streaming)
    r.add_get("/v1/voices", voices.list_voices, name="voices")
    r.add_post("/v1/voices", voices.register_voice, name="voices_register")
    voice = r.add_resource("/v1/voices/{name}", name="voice")
    voice.add_route("GET", voices.get_voice)
    voice.add_route("DELETE", voices.delete_voice)
    r.add_post("/v1/audio/speech", openai.speech, name="openai_speech")
    r.add_get("/v1/callbacks/secret", callbacks.callback_secret, name="callback_secret")

    r.add_post("/tts/submit", legacy.submit, name="legacy_submit")
    r.add_get("/tts/query/{task_id}", legacy.query, name="legacy_query")

    r.add_get("/healthz", health.healthz, name="healthz")
    r.add_get("/readyz", health.readyz, name="readyz")
    r.add_get("/metrics", metrics.metrics_view, name="metrics")

    if static_dir.is_dir():
        r.add_static("/static", static_dir, name="static")
    else:
        log.warning("no static directory at %s: the page will have no script or style", static_dir)
