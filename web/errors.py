"""One error shape for every failure (OpenAI's `{"error": {...}}`): `ApiError` and its helpers.

Old `/tts/...` endpoints keep FastAPI's `{"detail": ...}` shape, which their clients parse. The
middleware that gives every failure this shape is in error_handling.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from aiohttp import web

LEGACY_PREFIX = "/tts/"  # the previous design's endpoints, which keep its error shape

_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    429: "rate_limit_error",
}


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
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.type = type or error_type(status)
        self.headers = dict(headers or {})
        self.extra = dict(extra or {})

    def error(self) -> dict[str, Any]:
        """The inner object (also the `error` of a WebSocket error frame)."""
        return {"message": self.message, "type": self.type, "param": self.param, "code": self.code}

    def body(self) -> dict[str, Any]:
        return {"error": self.error(), **self.extra}

    def response(self) -> web.Response:
        return json_response(self.body(), status=self.status, headers=self.headers)

    def legacy_response(self) -> web.Response:
        return json_response({"detail": self.message}, status=self.status, headers=self.headers)


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
