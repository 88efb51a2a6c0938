"""The job a request is about, for the lines logged about it; aiohttp's access log with it."""

from __future__ import annotations

import contextlib

from aiohttp import web
from aiohttp.web_log import AccessLogger
from aiohttp.web_request import BaseRequest

from core.infra.logs import job_context
from core.queue.job import is_job_id, legacy_job_id


def request_job_id(request: BaseRequest) -> str | None:
    """The job id named by the request's route, if it is a valid one (a path segment is the
    client's text: anything else must not reach, or forge, a log line)."""
    match_info = request.match_info if isinstance(request, web.Request) else {}
    raw = match_info.get("job_id") or legacy_job_id(match_info.get("task_id", ""))
    return raw if is_job_id(raw) else None


class JobAccessLogger(AccessLogger):
    def log(self, request: BaseRequest, response: web.StreamResponse, time: float) -> None:
        job_id = request_job_id(request)
        with job_context(job_id) if job_id else contextlib.nullcontext():
            super().log(request, response, time)
