"""CHATTTS_REDIS_MIN_REPLICAS against a Redis with no replica: a change is written but never
confirmed (503), a refusal that wrote nothing stays the refusal, a retry adds no second job."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from core.infra.settings import Settings
from core.queue.job import SynthesisRequest
from core.queue.results import BacklogFull, Unreplicated
from core.queue.store import Queue

WAIT_MS = 50


async def test_an_unconfirmed_submission_is_refused_and_its_retry_adds_nothing(
    settings: Settings, aredis: Redis
) -> None:
    queue = Queue(aredis, settings.replace(redis_min_replicas=1, redis_replica_wait_ms=WAIT_MS))
    request = SynthesisRequest(text="Only a primary holds this.")
    with pytest.raises(Unreplicated) as refused:
        await queue.enqueue(request, "c1", idempotency_key="once")
    assert refused.value.status == 503 and refused.value.code == "not_replicated"
    assert "0 of the 1 replicas" in str(refused.value) and "Idempotency-Key" in str(refused.value)
    job_id = refused.value.job_id
    assert job_id is not None and await queue.get(job_id) is not None  # on the primary, as said
    with pytest.raises(Unreplicated):  # the retry finds the same job, still unconfirmed
        await queue.enqueue(request, "c1", idempotency_key="once")
    assert await aredis.scard(queue.keys.active("c1")) == 1
    # Nothing required: the same submission is answered at once.
    plain = Queue(aredis, settings)
    assert (await plain.enqueue(request, "c1", idempotency_key="once")).job_id == job_id


async def test_refusals_and_no_ops_need_no_replica(settings: Settings, aredis: Redis) -> None:
    strict = settings.replace(redis_min_replicas=1, redis_replica_wait_ms=WAIT_MS, max_backlog=0)
    queue = Queue(aredis, strict)
    with pytest.raises(BacklogFull):
        await queue.enqueue(SynthesisRequest(text="No room."), "c1")
    assert await queue.cancel("0" * 32, "c1") == ("missing", None)
