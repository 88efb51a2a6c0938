"""What the OpenAPI document says of one route: its parameters, its body, and its answers, with
the JSON Schemas of the very types its view builds them as (web/schemas/*answers.py, errors.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter
from pydantic.json_schema import GenerateJsonSchema

from core.audio.catalog import CATALOG
from core.infra.settings import Settings
from web.errors import LEGACY_PREFIX, ErrorBody, LegacyError
from web.schemas.compat_answers import LegacyValidationError

Schema = dict[str, Any]
JSON = "application/json"
SSE = "text/event-stream"
HTML = "text/html"
AUDIO = tuple(dict.fromkeys(f.mime for f in CATALOG.values()))  # every format's media type
BINARY: Schema = {"type": "string", "format": "binary"}
TEXT: Schema = {"type": "string"}
_SCHEMA_OF = {"audio": BINARY, "text": TEXT}


@dataclass(frozen=True)
class Answer:
    """One answer of a route: its status, and per media type the type its body is built as (a
    TypedDict, or any type pydantic describes), a literal schema (bytes, text) or None."""

    status: int
    description: str
    content: dict[str, Any] = field(default_factory=dict)  # media type -> shape or schema
    headers: tuple[str, ...] = ()  # headers worth naming: Location, Retry-After, ETag


def json(status: int, shape: Any, description: str = "", headers: tuple[str, ...] = ()) -> Answer:
    """`status` with a JSON body built as `shape` (a TypedDict of web/schemas/*answers.py)."""
    return Answer(status, description or shape.__doc__ or "", {JSON: shape}, headers)


def media(status: int, types: Iterable[str], description: str, *headers: str) -> Answer:
    """`status` with a body of one of `types`: bytes (audio), text (a page, subtitles), or
    events (SSE: no schema, as a schema there would say what each event is, docs/api.md)."""
    content = {t: _SCHEMA_OF.get(t.partition("/")[0], TEXT) if t != SSE else None for t in types}
    return Answer(status, description, content, headers)


def empty(status: int, description: str, *headers: str) -> Answer:
    return Answer(status, description, {}, headers)


# What each error status means here; every error body is ErrorBody (web/errors.py).
ERROR_MEANINGS = {
    400: "malformed: the error's `param` names what to fix",
    401: "an API key is required (Authorization: Bearer <key>)",
    403: "not allowed: another client's, a page of another site's, or not for this key",
    404: "no such job, voice, segment or worker (unknown, or expired)",
    408: "the request body stopped arriving",
    409: "not in a state for this: the job not ended or already ended, a name taken",
    413: "too large: the body, the text, or the audio it would keep",
    415: "send JSON (Content-Type: application/json), uncompressed",
    416: "the Range, or a stream's offset, lies past the end of the audio",
    422: "invalid: the error's `param` names the field and what it takes",
    429: "a rate or a cap reached: retry after Retry-After seconds",
    500: "the job failed: its reason in the message",
    503: "busy, paused, shutting down, or the job store unreachable: retry after Retry-After",
}
WAIT_HEADERS = {429: ("Retry-After",), 503: ("Retry-After",)}


def errors(*statuses: int) -> tuple[Answer, ...]:
    """The error answers of `statuses`, each `{"error": {...}}`."""
    return tuple(
        json(status, ErrorBody, ERROR_MEANINGS[status], WAIT_HEADERS.get(status, ()))
        for status in statuses
    )


def legacy_errors(*statuses: int) -> tuple[Answer, ...]:
    """The seed-era endpoints' errors: `{"detail": "..."}`, and FastAPI's list for a 422."""
    return tuple(
        json(
            status, LegacyValidationError if status == 422 else LegacyError, ERROR_MEANINGS[status]
        )
        for status in statuses
    )


class _NoFieldTitles(GenerateJsonSchema):
    """Pydantic's schemas less a title per field (generators name classes after titles)."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def json_schemas(shapes: Iterable[Any]) -> tuple[dict[Any, Schema], dict[str, Schema]]:
    """Each shape's schema (a `$ref` into components for a named type) and the components."""
    unique = list(dict.fromkeys(s for s in shapes if s is not None and not isinstance(s, dict)))
    inputs = [(shape, "serialization", TypeAdapter(shape)) for shape in unique]
    by_key, top = TypeAdapter.json_schemas(
        inputs,  # type: ignore[arg-type]
        ref_template="#/components/schemas/{model}",
        schema_generator=_NoFieldTitles,
    )
    return {key[0]: schema for key, schema in by_key.items()}, top.get("$defs", {})


def responses(answers: Iterable[Answer], schemas: dict[Any, Schema]) -> Schema:
    """The operation's `responses`: answers of one status merged (one content map)."""
    out: Schema = {}
    for answer in sorted(answers, key=lambda a: a.status):
        entry = out.setdefault(str(answer.status), {"description": answer.description})
        for media_type, shape in answer.content.items():
            schema = shape if isinstance(shape, dict) or shape is None else schemas[shape]
            entry.setdefault("content", {})[media_type] = {"schema": schema} if schema else {}
        for header in answer.headers:
            entry.setdefault("headers", {})[header] = {"schema": {"type": "string"}}
    return out


@dataclass(frozen=True)
class Operation:
    """A route's entry in the document (web/views/service/api_docs.py: OPERATIONS)."""

    summary: str
    tag: str
    answers: tuple[Answer, ...]
    body: Callable[[Settings], Schema] | None = None  # the JSON request body's schema
    query: tuple[tuple[str, Schema, str], ...] = ()  # (name, schema, description)
    form: Callable[[Settings], Schema] | None = None  # a multipart/form-data body's schema
    urlencoded: Callable[[Settings], Schema] | None = None  # an urlencoded form's schema
    path: tuple[tuple[str, Schema], ...] = ()  # path parameters that are not any string
    optional_body: bool = False  # the body may be left out


API_PREFIXES = ("/v1/", "/tts/", "/dev/")  # what the store and API keys stand in front of
API_PATHS = ("/v1", "/tts")


def common_errors(method: str, path: str, op: Operation, settings: Settings) -> list[Answer]:
    """What every route of its kind may answer besides its own: an API route's 503 (the job
    store unreachable) and 401 (API keys set); a body's 400, 408, 413, 415, 429 and 503 (bad,
    slow, large, not JSON, or more bytes in flight than allowed); a request from another site's
    page (403); and with any key set, 429 to an address that sent wrong keys (key_guesses.py)."""
    statuses = set()
    if path.startswith(API_PREFIXES) or path in API_PATHS:
        statuses.add(503)
        if settings.web.user_key_set:
            statuses.add(401)
    if method in ("POST", "DELETE"):
        statuses.add(403)
    if op.body is not None or op.form is not None or op.urlencoded is not None:
        statuses.update((400, 408, 413, 415, 429, 503))
    if settings.web.api_key_set:
        statuses.add(429)
    shape = legacy_errors if path.startswith(LEGACY_PREFIX) else errors
    return list(shape(*sorted(statuses)))


def operation_object(
    op: Operation, method: str, name: str, path: str, settings: Settings
) -> Schema:
    """The operation's object, less its responses (`responses`: all answers at once)."""
    out: Schema = {"summary": op.summary, "tags": [op.tag], "operationId": f"{name}_{method}"}
    typed = dict(op.path)
    params = [
        {"name": n, "in": "path", "required": True, "schema": typed.get(n, {"type": "string"})}
        for n in (part[1:-1] for part in path.split("/") if part.startswith("{"))
    ]
    params += [
        {"name": n, "in": "query", "schema": s, **({"description": d} if d else {})}
        for n, s, d in op.query
    ]
    if params:
        out["parameters"] = params
    content: Schema = {}
    if op.body is not None:
        content[JSON] = {"schema": op.body(settings)}
    if op.form is not None:
        content["multipart/form-data"] = {"schema": op.form(settings)}
    if op.urlencoded is not None:
        content["application/x-www-form-urlencoded"] = {"schema": op.urlencoded(settings)}
    if content:
        # One content type: required. Several (a voice's JSON or form): not marked required, as
        # openapi-python-client writes code that does not import for a required one.
        required = len(content) == 1 and not op.optional_body
        out["requestBody"] = {"required": required, "content": content}
    return out


def described(
    routes: Iterable[tuple[str, str, str]],
    operations: Mapping[tuple[str, str], Operation],
    settings: Settings,
) -> tuple[Schema, dict[str, Schema]]:
    """The document's `paths` for `routes` (method, route name, path) and its components'
    schemas: every answer's type described once, in one pass of pydantic."""
    paths: dict[str, Schema] = {}
    answers: dict[tuple[str, str], list[Answer]] = {}
    for method, name, path in routes:
        op = operations[(method, name)]  # KeyError: a route without its entry
        paths.setdefault(path, {})[method.lower()] = operation_object(
            op, method, name, path, settings
        )
        answers[(path, method)] = [*op.answers, *common_errors(method, path, op, settings)]
    shapes = (s for found in answers.values() for a in found for s in a.content.values())
    schemas, components = json_schemas(shapes)
    for (path, method), found in answers.items():
        paths[path][method.lower()]["responses"] = responses(found, schemas)
    return paths, components
