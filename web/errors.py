"""One error shape for every failure (OpenAI's `{"error": {...}}`): `ApiError` and its helpers.

Old `/tts/...` endpoints keep FastAPI's `{"detail": ...}` shape, which their clients parse. The
middleware that gives every failure this shape is in error_handling.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NotRequired

import orjson
from aiohttp import web
from typing_extensions import TypedDict

LEGACY_PREFIX = "/tts/"  # the previous design's endpoints, which keep its error shape

_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    429: "rate_limit_error",
}


class ErrorDetail(TypedDict):
    """What failed and what to fix (OpenAI's error object)."""

    message: str
    type: str  # invalid_request_error, authentication_error, rate_limit_error, server_error, …
    param: str | None  # the parameter or field at fault
    code: str  # stable, for programs: job_not_found, text_too_long, rate_limited, …
    limit: NotRequired[str]  # a 429's: which limit was reached


class ErrorBody(TypedDict):
    """Every error of the API: `{"error": {...}}`."""

    error: ErrorDetail
    state: NotRequired[str]  # the job's state, where it is why (409 not_ready, job_finished)


class LegacyError(TypedDict):
    """An error of the seed-era `/tts/...` endpoints, as FastAPI wrote it."""

    detail: str


def dumps(obj: Any) -> str:
    return orjson.dumps(obj).decode()


def json_response(
    data: Any, status: int = 200, headers: Mapping[str, str] | None = None
) -> web.Response:
    return web.json_response(data, status=status, headers=headers, dumps=dumps)


def error_type(status: int) -> str:
    if status >= 500:
        return "server_error"
    return _TYPES.get(status, "invalid_request_error")


class ApiError(Exception):
    """A failure to report to the client: status, a message that says what to fix, a code."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str,
        param: str | None = None,
        type: str | None = None,
        headers: Mapping[str, str] | None = None,
        state: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.type = type or error_type(status)
        self.headers = dict(headers or {})
        self.state = state

    def error(self) -> ErrorDetail:
        """The inner object (also the `error` of a WebSocket error frame)."""
        return {"message": self.message, "type": self.type, "param": self.param, "code": self.code}

    def body(self) -> ErrorBody:
        body: ErrorBody = {"error": self.error()}
        if self.state is not None:
            body["state"] = self.state
        return body

    def response(self) -> web.Response:
        return json_response(self.body(), status=self.status, headers=self.headers)

    def legacy_response(self) -> web.Response:
        body: LegacyError = {"detail": self.message}
        return json_response(body, status=self.status, headers=self.headers)


def redis_unavailable() -> ApiError:
    return ApiError(
        503,
        "the job store (Redis) is unreachable; retry in a moment",
        code="store_unavailable",
        headers={"Retry-After": "1"},
    )


def not_found(what: str, code: str = "not_found") -> ApiError:
    return ApiError(404, what, code=code)


def job_not_found(job_id: str) -> ApiError:
    """The one answer for a job id that names no job (malformed, unknown, or expired)."""
    return not_found(f"no job with id {job_id[:64]!r} (unknown, or expired)", "job_not_found")
