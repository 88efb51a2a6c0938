"""The middleware and hooks that answer every failure in the one error shape (errors.py): HTTP
exceptions, Redis outages, payload errors, unexpected exceptions, and bodies aiohttp writes itself.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

from aiohttp import HttpVersion11, web
from aiohttp.http_exceptions import BadHttpMessage
from aiohttp.typedefs import Handler
from aiohttp.web_protocol import RequestPayloadError
from redis.exceptions import OutOfMemoryError, ResponseError

from core.audio_store.base import StoreError
from core.infra.logs import job_context
from core.infra.redis_client import REDIS_DOWN
from core.queue.results import (
    BacklogFull,
    BacklogShareFull,
    ClientCapReached,
    IdempotencyKeyReused,
    QueueError,
    QueuePaused,
    StorageQuotaReached,
    StoreFull,
    StreamsFull,
)
from web.appkeys import METRICS, SETTINGS, THROUGHPUT
from web.errors import LEGACY_PREFIX, ApiError, dumps, redis_unavailable
from web.middlewares.access_log import request_job_id
from web.monitors.store import DEFAULT_S

log = logging.getLogger("chattts_online.web")

_NEEDS_STORE = ("/v1/", LEGACY_PREFIX)
_WAITS_FOR_STORE = frozenset({"/v1/events", "/v1/ws"})


def _from_http(request: web.Request, exc: web.HTTPException) -> ApiError:
    headers = {k: v for k, v in exc.headers.items() if k.lower() in ("allow", "retry-after")}
    if exc.status == 404:
        message = f"there is no endpoint {request.path[:200]!r}; see the API table in the README"
        return ApiError(404, message, code="unknown_endpoint", headers=headers)
    if exc.status == 405:
        allowed = exc.headers.get("Allow", "")
        message = f"{request.method} is not allowed on {request.path[:200]!r}; use {allowed}"
        return ApiError(405, message, code="method_not_allowed", headers=headers)
    if exc.status == 413:
        limit = request.app[SETTINGS].limits.max_body_bytes
        message = f"the request body is larger than the limit of {limit} bytes"
        return ApiError(413, message, code="body_too_large", headers=headers)
    return ApiError(exc.status, exc.text or exc.reason, code=f"http_{exc.status}", headers=headers)


def _where(request: web.Request) -> str:
    """The path as sent, for a log line: still percent-encoded (a decoded %0A would start a
    forged line of its own) and cut short."""
    return request.raw_path[:200]


def _store_down(request: web.Request) -> bool:
    """Redis failed its last probes (web/monitors/store.py) and this request needs it. Long-lived
    streams are let through: they wait for the store to come back by design; so are browsers'
    preflights (OPTIONS), so that a page reads the 503 of the request that follows."""
    meter = request.app.get(THROUGHPUT)
    return (
        meter is not None
        and meter.store_down
        and request.method != "OPTIONS"
        and request.path.startswith(_NEEDS_STORE)
        and request.path not in _WAITS_FOR_STORE
    )


def _store_full(request: web.Request) -> bool:
    """Redis is at its maxmemory (web/monitors/store.py) and this request would add to it."""
    meter = request.app.get(THROUGHPUT)
    return (
        meter is not None
        and meter.store_full
        and request.method == "POST"
        and request.path.startswith(_NEEDS_STORE)
    )


def _store_full_error() -> ApiError:
    return ApiError(
        503,
        "the job store is full (Redis reached its maxmemory); retry later, once jobs have "
        "expired, or ask the operator to give Redis more memory",
        code="store_full",
        headers={"Retry-After": "30"},
    )


def _replicas_short(request: web.Request) -> int | None:
    """Replicas in sync, when fewer than CHATTTS_REDIS_MIN_REPLICAS and this request writes."""
    wanted = request.app[SETTINGS].redis.redis_min_replicas
    meter = request.app.get(THROUGHPUT)
    if wanted <= 0 or meter is None or request.method not in ("POST", "DELETE"):
        return None
    in_sync = meter.replicas_in_sync
    if in_sync is None or in_sync >= wanted or not request.path.startswith(_NEEDS_STORE):
        return None
    return in_sync


def _replicas_short_error(in_sync: int, wanted: int) -> ApiError:
    return ApiError(
        503,
        f"Redis's primary has {in_sync} replica(s) in sync and this service requires {wanted} "
        "before it accepts a change (CHATTTS_REDIS_MIN_REPLICAS), so that it survives the loss "
        "of the primary. Nothing was written; retry in a few seconds (a failover or a "
        "replica's resync is under way)",
        code="not_enough_replicas",
        headers={"Retry-After": "2"},
    )


def _missing_static(request: web.Request) -> bool:
    """A static path with no file behind it. aiohttp finds out only while it sends the answer,
    then sends an empty 404 that no middleware sees; we say so before, in our shape."""
    resource = request.match_info.route.resource
    if not isinstance(resource, web.StaticResource):
        return False
    directory = Path(resource.get_info()["directory"])
    try:
        return not (directory / request.match_info.get("filename", "")).is_file()
    except OSError:  # a name too long for the file system, say: nothing is there
        return True


# A storage charge lapses when its job expires, hours away perhaps: past an hour a client is
# better told to come back in an hour than left to wait a day on one answer.
STORAGE_RETRY_MAX_S = 3600
STORE_FULL_RETRY_S = 30


def retry_after_s(exc: QueueError, app: web.Application) -> int:
    """How long a refused client should wait, from the queue's measured throughput
    (web/monitors/store.py); a fixed guess before the meter runs."""
    # Until the client's oldest charge lapses, or the oldest stream's chunks.
    if isinstance(exc, StorageQuotaReached | StreamsFull):
        return max(1, min(exc.wait_s, STORAGE_RETRY_MAX_S))
    if isinstance(exc, StoreFull):  # until running jobs are written and the store sampled again
        return STORE_FULL_RETRY_S
    if isinstance(exc, QueuePaused):  # as its operators said
        return max(1, exc.retry_after_s)
    meter = app.get(THROUGHPUT)
    if meter is None:
        return (
            DEFAULT_S if isinstance(exc, BacklogFull | ClientCapReached | BacklogShareFull) else 1
        )
    if isinstance(exc, BacklogFull):
        return meter.retry_after(exc.depth)
    if isinstance(exc, ClientCapReached):
        return meter.retry_after(share=exc.active)
    if isinstance(exc, BacklogShareFull):  # a few of its own jobs done
        return meter.retry_after(share=exc.held)
    return 1


def refusal(app: web.Application, exc: QueueError) -> ApiError:
    """The answer to a refusal of the queue (backlog full, client at its cap, unreplicated):
    its status and message, with Retry-After from the measured throughput."""
    if isinstance(exc, IdempotencyKeyReused):  # no retry makes it right
        return ApiError(exc.status, str(exc), code=exc.code, param="Idempotency-Key")
    headers = {"Retry-After": str(retry_after_s(exc, app))}
    return ApiError(exc.status, str(exc), code=exc.code, headers=headers)


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    job_id = request_job_id(request)
    with job_context(job_id) if job_id else contextlib.nullcontext():
        return await _answer(request, handler)


def _refuse_early(request: web.Request) -> None:
    """Raise what the request gets before its handler runs: a missing static file, or a store
    down, full or short of replicas."""
    if _missing_static(request):
        raise web.HTTPNotFound()
    if _store_down(request):
        _count_redis_error(request)
        raise redis_unavailable()
    if _store_full(request):
        raise _store_full_error()
    if (in_sync := _replicas_short(request)) is not None:
        raise _replicas_short_error(in_sync, request.app[SETTINGS].redis.redis_min_replicas)


async def _answer(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        _refuse_early(request)
        return await handler(request)
    except ApiError as exc:
        error = exc
    except QueueError as exc:
        error = refusal(request.app, exc)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        error = _from_http(request, exc)
    except ResponseError as exc:
        error = _from_redis_reply(request, exc)
    except StoreError as exc:
        log.warning("%s %s: audio store unavailable: %s", request.method, _where(request), exc)
        error = ApiError(
            503,
            "the audio store cannot be read just now; the audio is kept, retry shortly",
            code="audio_store_unavailable",
            headers={"Retry-After": "2"},
        )
    except REDIS_DOWN as exc:
        log.warning("%s %s: Redis unreachable: %s", request.method, _where(request), exc)
        _count_redis_error(request)
        error = redis_unavailable()
    except ConnectionResetError:
        # The client hung up while we read its request: nobody hears this answer; the status
        # (nginx's "client closed request") keeps it out of the server errors.
        log.info("%s %s: the client went away", request.method, _where(request))
        error = ApiError(499, "the client closed the connection", code="client_closed_request")
    except (RequestPayloadError, BadHttpMessage) as exc:
        # The body itself is broken: truncated (the client hung up mid-body), a bad chunk, a
        # Content-Encoding that does not decode. The client's fault, not ours: never a 500.
        log.info("%s %s: unreadable body: %r", request.method, _where(request), exc)
        error = ApiError(
            400,
            "the request body could not be read (truncated, or its Content-Encoding does "
            "not decode)",
            code="unreadable_body",
        )
    except Exception:
        log.exception("%s %s failed", request.method, _where(request))
        error = ApiError(500, "internal error; it was logged", code="internal_error")
    if request.path.startswith(LEGACY_PREFIX):
        return error.legacy_response()
    return error.response()


def _from_redis_reply(request: web.Request, exc: ResponseError) -> ApiError:
    """Redis refused a command: full (maxmemory with noeviction: it keeps what it has and
    refuses new writes), or our own mistake."""
    # redis-py raises OutOfMemoryError for Redis's "OOM ..." reply, without the prefix.
    if isinstance(exc, OutOfMemoryError) or str(exc).startswith("OOM"):
        log.warning("%s %s: Redis is full: %s", request.method, _where(request), exc)
        _count_redis_error(request)
        return _store_full_error()
    log.exception("%s %s failed", request.method, _where(request))
    return ApiError(500, "internal error; it was logged", code="internal_error")


def _count_redis_error(request: web.Request) -> None:
    metrics = request.app.get(METRICS)
    if metrics is not None:
        metrics.redis_errors.inc()


async def json_error_bodies(request: web.Request, response: web.StreamResponse) -> None:
    """on_response_prepare: errors raised outside the middleware chain get our shape too.

    aiohttp answers some requests before any middleware runs (an unknown `Expect` header: 417)
    with a plain-text body; clients of this API parse one JSON shape for every error.
    """
    if (
        response.status < 400
        or not isinstance(response, web.Response)
        or response.content_type != "text/plain"
    ):
        return
    message = response.text or response.reason
    error = ApiError(response.status, message, code=f"http_{response.status}")
    body = {"detail": message} if request.path.startswith(LEGACY_PREFIX) else error.body()
    data = dumps(body).encode()
    response.content_type = "application/json"
    response.body = data
    # aiohttp has already counted the plain text by the time this hook runs.
    response.headers["Content-Length"] = str(len(data))


async def expect_handler(request: web.Request) -> None:
    """`Expect: 100-continue` as aiohttp does; any other expectation: 417 (JSON, never a 500)."""
    expect = request.headers.get("Expect", "")
    if request.version != HttpVersion11:
        return
    if expect.lower() != "100-continue":
        raise web.HTTPExpectationFailed(text=f"unknown expectation {expect[:64]!a}")
    # What aiohttp's own default handler does, through public names only.
    await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    request.writer.output_size = 0  # the interim answer is not part of the body's size
