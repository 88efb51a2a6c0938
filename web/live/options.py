"""What a live context speaks with (voice, seed, speed, the model's parameters), checked when the
context opens as a job request would be, and then the same for each of its segments."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from core.queue.job import MAX_SEED
from web.errors import ApiError
from web.intake.door import Policy, Who, checked_request

# The fields of a job request a context takes; its text, format and streaming are the session's.
FIELDS = frozenset(
    {"voice", "seed", "speed", "temperature", "top_p", "top_k", "refine", "prompt", "normalize"}
) | {"stream_check"}  # and how its segments are heard (docs/checks.md)
# A context that names no seed gets one of its own, so that its segments sound alike.
SEED_BOUND = MAX_SEED


@dataclass
class LiveOptions:
    """A context's request fields (all but text, format and stream). `voice` is fixed by the
    first segment when the client names none (read in that segment's language)."""

    fields: dict[str, Any] = field(default_factory=dict)

    @property
    def voice(self) -> str | None:
        voice = self.fields.get("voice")
        return voice if isinstance(voice, str) else None


async def live_options(app: web.Application, client: str, given: dict[str, Any]) -> LiveOptions:
    """The options an `open` names (only FIELDS, flat or under "params"), checked now so that a
    wrong voice or parameter is refused before any text is sent."""
    params = given.get("params") or {}
    if not isinstance(params, dict):
        raise ApiError(422, "'params' must be an object", code="invalid_params", param="params")
    fields = {k: v for k, v in {**params, **given}.items() if k in FIELDS and v is not None}
    unknown = sorted(set(params) - FIELDS)
    if unknown:
        raise ApiError(
            422,
            f"unknown parameter {unknown[0]!r}; a context takes {', '.join(sorted(FIELDS))}",
            code="invalid_params",
            param=f"params.{unknown[0]}",
        )
    fields.setdefault("seed", secrets.randbelow(SEED_BOUND))
    probe = {**fields, "text": "Hello."}
    await checked_request(app, Who(client, ""), probe, Policy(fixed={"format": "pcm"}))
    return LiveOptions(fields)
