"""The callback outbox: callbacks queued by the scripts that end jobs (lua/_prelude.lua), taken by
senders with a lease (lua/callback_claim.lua) and settled attempt by attempt
(lua/callback_result.lua). At least once: a sender that dies holding one lets it fall due again
when its lease lapses; a lapsed sender's late result is refused, so no attempt is recorded twice.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from core.infra.redis_client import RedisClient
from core.queue import scripts
from core.queue.keys import Keys

Outcome = Literal["delivered", "retry", "failed"]


@dataclass(frozen=True)
class Callback:
    """One callback in a sender's hand."""

    job_id: str
    url: str
    client: str
    attempts: int  # attempts made, this one included
    job: dict[str, Any]  # the job as it ended
    claim: str
    # Whose share of deliveries it counts in: its API key, or its address's clients together.
    owner: str = ""

    @property
    def message_id(self) -> str:
        """The same for every attempt: receivers de-duplicate by it (Standard Webhooks)."""
        return f"msg_{self.job_id}"


class Outbox:
    """The callbacks of one queue."""

    def __init__(self, redis: RedisClient, keys: Keys) -> None:
        self.redis = redis
        self.keys = keys
        self._claim = scripts.Script(redis, "callback_claim")
        self._result = scripts.Script(redis, "callback_result")

    async def claim(
        self,
        now_ms: int,
        lease_ms: int,
        limit: int,
        busy: dict[str, int] | None = None,
        per_client: int = 1 << 30,
        defer_ms: int = 1000,
    ) -> list[Callback]:
        """Up to `limit` callbacks due by `now_ms`, each held for `lease_ms`; at most
        `per_client` in flight for one owner, counting `busy` (its deliveries in flight
        already): its others are deferred by `defer_ms`."""
        token = uuid.uuid4().hex
        in_flight = [item for client_count in (busy or {}).items() for item in client_count]
        reply: list[bytes] = await self._claim(
            keys={"due": self.keys.callbacks_due, "data": self.keys.callbacks},
            args={
                "now": now_ms,
                "lease_ms": lease_ms,
                "max": limit,
                "claim": token,
                "per_client": per_client,
                "defer_ms": defer_ms,
                "in_flight": in_flight,
            },
        )
        out: list[Callback] = []
        for job_id, raw in zip(reply[::2], reply[1::2], strict=True):
            record = orjson.loads(raw)
            out.append(
                Callback(
                    job_id=job_id.decode(),
                    url=str(record["url"]),
                    client=str(record.get("client") or ""),
                    owner=str(record.get("owner") or record.get("client") or ""),
                    attempts=int(record.get("attempts") or 0),
                    job=dict(record.get("job") or {}),
                    claim=token,
                )
            )
        return out

    async def settle(
        self, callback: Callback, outcome: Outcome, next_ms: int = 0, error: str = ""
    ) -> str:
        """Record an attempt: 'ok', 'stale' (the claim lapsed) or 'gone'."""
        keys = {
            "due": self.keys.callbacks_due,
            "data": self.keys.callbacks,
            "job": self.keys.job(callback.job_id),
            "stats": self.keys.stats,
        }
        args = {
            "id": callback.job_id,
            "claim": callback.claim,
            "outcome": outcome,
            "next_ms": next_ms,
            "error": error[:300],
        }
        verdict: bytes = await self._result(keys=keys, args=args)
        return verdict.decode()
