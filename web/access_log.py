"""aiohttp's access log, with the job id on the lines of requests about one job."""

from __future__ import annotations

import contextlib

from aiohttp import web
from aiohttp.web_log import AccessLogger
from aiohttp.web_request import BaseRequest

from workers.logs import job_context


class JobAccessLogger(AccessLogger):
    def log(self, request: BaseRequest, response: web.StreamResponse, time: float) -> None:
        match_info = request.match_info if isinstance(request, web.Request) else {}
        job_id = match_info.get("job_id") or match_info.get("task_id")
        with job_context(job_id) if job_id else contextlib.nullcontext():
            super().log(request, response, time)
