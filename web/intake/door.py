"""The one door every protocol submits through: the submission's rate, its request checked
(text, voice, the fleet), its storage, its job queued and, for an answer that waits on its job,
the connection's lease. Every refusal is an ApiError; a view translates its wire format only."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from aiohttp import web

from core.audio.sizes import expected_bytes
from core.queue.job import SynthesisRequest
from core.queue.results import QueueError, Room, Submitted
from core.text.sentences import clean_text, has_speakable
from web.appkeys import KEY_SHARES, METRICS, QUEUE, SETTINGS, THROUGHPUT
from web.clients.identity import client_id
from web.clients.limits import RateLimited, check_rate, ipv6_network, leases, submitters
from web.errors import ApiError
from web.intake.submissions import check_voice, clean
from web.middlewares.error_handling import refusal
from web.monitors.fleet import check_speakable
from web.monitors.memory import address
from web.schemas.jobs import callback_url, check_length, check_text, synthesis


@dataclass(frozen=True)
class Who:
    """Who submits: the client (an API key's, a cookie's) and the address it comes from."""

    client: str
    source: str


def who(request: web.Request, client: str | None = None) -> Who:
    return Who(client or client_id(request), address(request))


@dataclass(frozen=True)
class Policy:
    """How one protocol submits: what it does past the rate (`refuse`: 429; `wait`: its turn,
    for a listener never refused mid-answer), the longest text (None: CHATTTS_MAX_TEXT_CHARS),
    whether a longer one may be a document, whether it takes a callback_url, whether its
    connection waits on the job (a lease while it is open), the fields it sets itself, and its
    refusals of a request in its own terms."""

    limited: Literal["refuse", "wait"] = "refuse"
    max_chars: int | None = None
    documents: bool = False
    callbacks: bool = False
    hold: bool = False
    priority: Literal["normal", "high", "bulk"] | None = None
    fixed: Mapping[str, Any] = field(default_factory=dict)
    in_own_terms: Callable[[ApiError], ApiError] | None = None


@dataclass(frozen=True)
class Admitted:
    """A job queued through the door: its request, what the queue said, its callback."""

    request: SynthesisRequest
    submitted: Submitted
    callback: str | None = None
    document: bool = False

    @property
    def job_id(self) -> str:
        return self.submitted.job_id

    @property
    def cursor(self) -> str | None:
        """Where the job's events start (its `queued` event)."""
        return self.submitted.event_id


@contextlib.asynccontextmanager
async def admit(
    app: web.Application, by: Who, payload: Any, policy: Policy, idem: str | None = None
) -> AsyncIterator[Admitted]:
    """Admit one submission, in the one order: its rate, its request, the lease of a connection
    that waits on it (held while the block runs), its storage and its job."""
    await charge(app, by, policy.limited)
    try:
        request, callback, document = await checked_request(app, by, payload, policy)
    except ApiError as exc:
        if policy.in_own_terms is None:
            raise
        raise policy.in_own_terms(exc) from None
    async with _held(app, by, policy.hold):
        submitted = await queue(app, by, request, idem, callback, document)
        yield Admitted(request, submitted, callback, document)


async def charge(app: web.Application, by: Who, limited: Literal["refuse", "wait"]) -> None:
    """Charge a submission to its client's and address's rates (CHATTTS_SUBMIT_RATE_*): past
    them a 429, or with `wait` its turn."""
    buckets = submitters(app, by.client, by.source)
    while True:
        try:
            await check_rate(app[QUEUE].limits, "submissions", buckets)
            return
        except RateLimited as exc:
            if limited == "refuse":
                raise
            await asyncio.sleep(exc.retry_after_s)


async def checked_request(
    app: web.Application, by: Who, payload: Any, policy: Policy
) -> tuple[SynthesisRequest, str | None, bool]:
    """A submission's request checked: its callback_url (where the protocol takes one), its
    text cleaned (off the event loop when long) and its fields validated (web/schemas), its
    voice known to this client and speakable by the live workers, a document's rules, its
    priority; (request, callback, whether it is a document)."""
    limits = app[SETTINGS].limits
    max_chars = limits.max_text_chars if policy.max_chars is None else policy.max_chars
    document_chars = limits.max_document_chars if policy.documents else None
    if not isinstance(payload, dict):
        raise ApiError(422, "the body must be a JSON object", code="invalid_body")
    payload = {**payload, **policy.fixed}
    if policy.priority is not None:
        payload["priority"] = policy.priority
    callback = None
    if policy.callbacks:
        callback = callback_url(payload, app[SETTINGS].callbacks.allow_networks)
    text = payload.get("text")
    if isinstance(text, str):
        check_length(text, max_chars, document_chars)  # as sent: never cleaned past the limit
        payload["text"] = await clean(text)
    request = synthesis(payload, max_chars, document_chars)
    await check_voice(app[QUEUE], request.voice, by.client)
    await check_speakable(app[QUEUE], request.text, request.voice, request.normalize)
    document = len(request.text) > max_chars
    if document:
        _check_document(request, max_chars)
    check_storage(app, request, document)
    if policy.priority is None and request.priority == "high" and not by.client.startswith("key-"):
        raise ApiError(
            403,
            "'priority': 'high' is for clients with an API key (CHATTTS_API_KEYS); anyone else "
            "would jump the queue of everyone: leave it out",
            code="priority_not_allowed",
            param="priority",
        )
    return request, callback, document


def _check_document(request: SynthesisRequest, max_text_chars: int) -> None:
    """A job past CHATTTS_MAX_TEXT_CHARS is a document: kept in parts (core/audio/documents.py),
    followed by its progress events and its parts, not streamed in chunks."""
    if request.stream:
        raise ApiError(
            422,
            f"a text of more than {max_text_chars} characters is a document: follow its "
            "progress events and fetch its audio when it ends ('stream': true is for shorter "
            "jobs)",
            code="document_stream",
            param="stream",
        )


def _held(app: web.Application, by: Who, hold: bool) -> contextlib.AbstractAsyncContextManager[Any]:
    return leases(app, by.client, by.source) if hold else contextlib.nullcontext()


async def queue(
    app: web.Application,
    by: Who,
    request: SynthesisRequest,
    idem: str | None = None,
    callback: str | None = None,
    document: bool = False,
) -> Submitted:
    """Queue a checked request, its expected audio charged to the client's storage quota (and
    its address's, an IPv6 address's /48): one script, one round trip. A refusal is the one
    answer (status, Retry-After); a new job is counted."""
    expected = expected_bytes(request.text, request.format, document, request.speed)
    source = ipv6_network(by.source) or by.source  # a site's /48 is one owner: its /64s share
    try:
        submitted = await app[QUEUE].enqueue(
            request,
            by.client,
            idem,
            callback_url=callback,
            document=document,
            expected_bytes=expected,
            source=source,
            share=app[KEY_SHARES].get(by.client),
            room=room(app),
        )
    except QueueError as exc:
        raise refusal(app, exc) from None
    if not submitted.duplicate:
        app[METRICS].jobs_submitted.inc()
    return submitted


def check_storage(app: web.Application, request: SynthesisRequest, document: bool) -> None:
    """413 for a job whose audio no client could ever keep (core/audio/sizes.py), before any
    lease is taken. Within the quota, the client's and the store's room are charged atomically
    with the job (enqueue.lua)."""
    expected = expected_bytes(request.text, request.format, document, request.speed)
    quota = app[SETTINGS].limits.storage_per_client_bytes
    if not quota or expected <= quota:
        return
    # A document keeps its parts as PCM whatever its format: only a shorter one helps.
    fix = "" if document else ", or ask for a compressed format (mp3, opus)"
    raise ApiError(
        413,
        f"this job's audio would take about {expected / 1e6:.0f} MB, more than the "
        f"{quota / 1e6:.0f} MB a client may keep: split the text into shorter jobs{fix}",
        code="job_too_large",
        param="text",
    )


def room(app: web.Application) -> Room:
    """What a new job may take at the last sample (web/monitors/store.py)."""
    where = "the audio store" if app[QUEUE].stored.store else "Redis, below its maxmemory,"
    budget, meter = app[SETTINGS].limits.stream_chunk_bytes, app.get(THROUGHPUT)
    return meter.room(budget, where) if meter is not None else Room(None, budget, where)


class Template:
    """A live context's options, admitted once: its first segment passes the whole door (the
    voice named, or picked by that segment's language, and checked); each later one is the
    admitted request with its own text, its text checked and its rate charged (it waits its
    turn)."""

    def __init__(self, app: web.Application, by: Who, fields: dict[str, Any]) -> None:
        self.app, self.by, self.fields = app, by, fields
        self.admitted: SynthesisRequest | None = None
        self.policy = Policy(limited="wait", fixed={"format": "pcm", "stream": True})

    async def request(self, text: str) -> SynthesisRequest | None:
        """The request of a segment (None: nothing in it to say), charged and checked."""
        text = clean_text(text)
        if not has_speakable(text):
            return None
        await charge(self.app, self.by, "wait")
        if self.admitted is None:
            payload = {**self.fields, "text": text}
            request, _, _ = await checked_request(self.app, self.by, payload, self.policy)
            self.admitted = request
            self.fields["voice"] = request.voice  # what the context speaks with, from now on
            return request
        check_text(text, self.app[SETTINGS].limits.max_text_chars)
        request = self.admitted.model_copy(update={"text": text})
        await check_speakable(self.app[QUEUE], text, request.voice, request.normalize)
        check_storage(self.app, request, False)
        return request
