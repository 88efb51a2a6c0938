"""The job a request is about, for the lines logged about it; aiohttp's access log with it."""

from __future__ import annotations

import contextlib
import re

from aiohttp import web
from aiohttp.web_log import AccessLogger
from aiohttp.web_request import BaseRequest

from workers.logs import job_context

# Job ids are uuid4 hex (the legacy API also accepts them dashed or in capitals). Only a valid
# id is logged: a path segment is the client's text and must not forge log lines.
_JOB_ID = re.compile(r"[0-9a-f]{32}")


def request_job_id(request: BaseRequest) -> str | None:
    """The job id named by the request's route, if it is a valid one."""
    match_info = request.match_info if isinstance(request, web.Request) else {}
    raw = match_info.get("job_id") or match_info.get("task_id", "").replace("-", "").lower()
    return raw if _JOB_ID.fullmatch(raw) else None


class JobAccessLogger(AccessLogger):
    def log(self, request: BaseRequest, response: web.StreamResponse, time: float) -> None:
        job_id = request_job_id(request)
        with job_context(job_id) if job_id else contextlib.nullcontext():
            super().log(request, response, time)
