"""What the operators' console accepts: its query parameters and action bodies, each refusal naming
the parameter and what to send."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.queue.job import JobState, is_job_id
from core.queue.keys import USAGE_DAYS_KEPT
from web.errors import ApiError
from web.schemas.jobs import valid_cursor

# A page of the console's lists; a bulk action's ids at once.
MAX_PAGE = 500
MAX_IDS = 1_000
MAX_USAGE_DAYS = USAGE_DAYS_KEPT  # what the tallies keep
MAX_REASON_CHARS = 200
MAX_KEY_CHARS = 512  # an admin key sent to sign in
# What Retry-After a paused queue answers by default, and at most (a day: a client backs off,
# it does not give up).
PAUSE_RETRY_AFTER_S = 60
MAX_PAUSE_RETRY_AFTER_S = 86_400


def _invalid(param: str, message: str) -> ApiError:
    return ApiError(400, message, code="invalid_parameter", param=param)


def integer(query: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = query.get(name)
    if raw is None:
        return default
    if not (raw.isascii() and raw.isdigit()) or not low <= int(raw) <= high:
        raise _invalid(name, f"'{name}' is a whole number from {low} to {high}")
    return int(raw)


def timestamp(query: Mapping[str, str], name: str) -> float | None:
    """A time as Unix seconds (what every `*_at` field of a job holds)."""
    raw = query.get(name)
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value < 1e11:
        raise _invalid(name, f"'{name}' is a time in Unix seconds, such as 1764806400.5")
    return value


def entry_cursor(query: Mapping[str, str]) -> str | None:
    """A page's cursor: the `next_cursor` of the page before (a stream entry id)."""
    return valid_cursor(query.get("cursor"), "cursor")


def states(query: Mapping[str, str]) -> frozenset[str]:
    raw = query.get("state", "")
    wanted = frozenset(s.strip() for s in raw.split(",") if s.strip())
    known = {s.value for s in JobState}
    if wanted - known:
        raise _invalid("state", f"'state' is one or more of {', '.join(sorted(known))}")
    return wanted


def text(query: Mapping[str, str], name: str, limit: int = 200) -> str | None:
    raw = query.get(name, "").strip()
    if len(raw) > limit:
        raise _invalid(name, f"'{name}' is at most {limit} characters")
    return raw or None


def job_ids(body: Any) -> list[str] | None:
    """The `ids` of a bulk action, or None for `"all": true`."""
    if not isinstance(body, dict):
        raise ApiError(
            400, 'send a JSON object: {"ids": [...]} or {"all": true}', code="invalid_body"
        )
    if not isinstance(body.get("all", False), bool):
        raise ApiError(400, "'all' is true or false", code="invalid_body", param="all")
    if body.get("all") is True and "ids" not in body:
        return None
    ids = body.get("ids")
    if not isinstance(ids, list) or not ids or len(ids) > MAX_IDS:
        raise ApiError(
            400,
            f"'ids' is a list of 1 to {MAX_IDS} job ids (or send {{\"all\": true}})",
            code="invalid_body",
            param="ids",
        )
    bad = [i for i in ids if not isinstance(i, str) or not is_job_id(i)]
    if bad:
        raise ApiError(
            400,
            f"not job ids: {', '.join(map(str, bad[:5]))[:200]}",
            code="invalid_body",
            param="ids",
        )
    return list(dict.fromkeys(ids))


def pause(body: Any) -> tuple[str, int]:
    """A pause's reason (shown to refused clients) and its Retry-After."""
    if not isinstance(body, dict) or set(body) - {"reason", "retry_after_s"}:
        raise ApiError(
            400,
            "send a JSON object with 'reason' (optional, shown to refused clients) and "
            "'retry_after_s' (optional)",
            code="invalid_body",
        )
    reason = body.get("reason", "")
    if not isinstance(reason, str) or len(reason) > MAX_REASON_CHARS:
        raise ApiError(
            400,
            f"'reason' is text of at most {MAX_REASON_CHARS} characters",
            code="invalid_body",
            param="reason",
        )
    after = body.get("retry_after_s", PAUSE_RETRY_AFTER_S)
    if (
        isinstance(after, bool)
        or not isinstance(after, int)
        or not 1 <= after <= MAX_PAUSE_RETRY_AFTER_S
    ):
        raise ApiError(
            400,
            f"'retry_after_s' is a whole number of seconds from 1 to {MAX_PAUSE_RETRY_AFTER_S}",
            code="invalid_body",
            param="retry_after_s",
        )
    return " ".join(reason.split()), after
