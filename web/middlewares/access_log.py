"""The job a request is about, for the lines logged about it; aiohttp's access log with it,
and one quiet line for a request it cannot parse."""

from __future__ import annotations

import contextlib
import logging

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_log import AccessLogger, KeyMethod
from aiohttp.web_request import BaseRequest

from core.infra.logs import job_context
from core.queue.job import is_job_id, legacy_job_id


def request_job_id(request: BaseRequest) -> str | None:
    """The job id named by the request's route, if it is a valid one (a path segment is the
    client's text: anything else must not reach, or forge, a log line)."""
    try:
        match_info = request.match_info if isinstance(request, web.Request) else {}
    except AssertionError:  # a request aiohttp could not parse was never routed
        match_info = {}
    raw = match_info.get("job_id") or legacy_job_id(match_info.get("task_id", ""))
    return raw if is_job_id(raw) else None


# Query parameters whose values are credentials (an API key sent as `?api_key=` is refused, and
# must not be kept in the log either): any whose name holds one of these.
_SECRET_NAMES = ("key", "token", "secret", "password", "auth", "sig")


def masked_request_line(request: BaseRequest, response: web.StreamResponse, time: float) -> str:
    """The request line as aiohttp logs it (`%r`), credentials in its query string masked."""
    url = request.rel_url
    if url.query and any(_secret(name) for name in url.query):
        url = url.with_query([(k, "***" if _secret(k) else v) for k, v in url.query.items()])
    version = request.version
    return f"{request.method} {url.raw_path_qs} HTTP/{version.major}.{version.minor}"


def _secret(name: str) -> bool:
    lowered = name.lower()
    return any(part in lowered for part in _SECRET_NAMES)


class JobAccessLogger(AccessLogger):
    """aiohttp's access log: each line in its job's context, credentials in queries masked."""

    def __init__(self, logger: logging.Logger, log_format: str = AccessLogger.LOG_FORMAT) -> None:
        super().__init__(logger, log_format)
        self._methods = [
            KeyMethod(key, masked_request_line) if key == "first_request_line" else method
            for key, method in ((m.key, m) for m in self._methods)
        ]

    def log(self, request: BaseRequest, response: web.StreamResponse, time: float) -> None:
        job_id = request_job_id(request)
        with job_context(job_id) if job_id else contextlib.nullcontext():
            super().log(request, response, time)


class MalformedRequestLine(logging.Filter):
    """aiohttp logs a request it cannot parse as an ERROR with a traceback (2 KB for 45 bytes
    of garbage): here one INFO line that says what was wrong, without the client's bytes."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, HttpProcessingError):
            first = str(error.message).strip().splitlines()[0] if error.message else ""
            record.msg, record.args = "malformed request: %s %s", (error.code, first[:200])
            record.exc_info, record.exc_text = None, None
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


def quiet_malformed_requests() -> None:
    """Install MalformedRequestLine on aiohttp's server logger (once per process)."""
    server = logging.getLogger("aiohttp.server")
    if not any(isinstance(f, MalformedRequestLine) for f in server.filters):
        server.addFilter(MalformedRequestLine())
