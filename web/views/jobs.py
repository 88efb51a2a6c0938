"""Jobs: submit (`POST /v1/tts/jobs`), read its status, cancel it (web/job_service.py)."""

from __future__ import annotations

from aiohttp import web

from web import job_service
from web.appkeys import QUEUE
from web.clients.identity import client_id, is_admin
from web.clients.limits import check_submit
from web.errors import json_response
from web.monitors.memory import address
from web.schemas.jobs import idempotency_key, job_urls, json_body


async def create_job(request: web.Request) -> web.Response:
    idem = idempotency_key(request.headers.get("Idempotency-Key"))
    payload = await json_body(request)
    await check_submit(request)
    body = await job_service.submit(
        request.app, client_id(request), payload, idem, source=address(request)
    )
    return json_response(body, status=202, headers={"Location": body["status_url"]})


async def get_job(request: web.Request) -> web.Response:
    job = await job_service.get(request.app, request.match_info["job_id"])
    body = {**job.public(), **job_urls(request.app, job.id)}
    if job.state == "queued":
        body["position"] = await request.app[QUEUE].position(job)
    return json_response(body)


async def delete_job(request: web.Request) -> web.Response:
    job_id = request.match_info["job_id"]
    client = "" if is_admin(request) else client_id(request)
    state = await job_service.cancel(request.app, job_id, client)
    return json_response({"id": job_id, "state": state}, status=202)
