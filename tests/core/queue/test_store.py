"""Submissions the queue refuses for what one owner holds of what everyone shares."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from core.infra.settings import Settings
from core.queue.job import SynthesisRequest
from core.queue.results import BacklogShareFull, QueueError
from core.queue.store import Queue


async def test_one_address_holds_at_most_its_share_of_the_backlog(
    settings: Settings, aredis: Redis
) -> None:
    """Fresh cookies of one address share one share; another address, and an API key, are
    still taken; a share comes back as its jobs end."""
    queue = Queue(aredis, settings.replace(max_backlog=100, max_backlog_per_owner=5))
    await queue.ensure_group()
    body = SynthesisRequest(text="Queued behind the flood.")
    ids = [
        (await queue.enqueue(body, f"cookie-{n}", source="203.0.113.7")).job_id for n in range(5)
    ]
    with pytest.raises(BacklogShareFull) as refused:
        await queue.enqueue(body, "cookie-new", source="203.0.113.7")
    assert refused.value.code == "backlog_share" and "your address" in str(refused.value)
    assert (await queue.enqueue(body, "cookie-other", source="198.51.100.2")).job_id
    for _ in range(5):  # an API key counts as itself, wherever it comes from
        await queue.enqueue(body, "key-batch", source="203.0.113.7")
    with pytest.raises(BacklogShareFull, match="your API key"):
        await queue.enqueue(body, "key-batch", source="203.0.113.7")
    assert (await queue.cancel(ids[0], "cookie-0"))[0] == "cancelled"
    assert (await queue.cancel(ids[0], "cookie-0"))[0] == "terminal"  # given back once only
    await queue.enqueue(body, "cookie-new", source="203.0.113.7")
    with pytest.raises(BacklogShareFull):
        await queue.enqueue(body, "cookie-newer", source="203.0.113.7")


async def test_a_few_owners_cannot_fill_the_backlog_between_them(
    settings: Settings, aredis: Redis
) -> None:
    """The share shrinks as more owners wait (max-min): four addresses flooding as fast as they
    can leave room for a fifth, and with it waiting, for a sixth."""
    queue = Queue(aredis, settings.replace(max_backlog=20, max_backlog_per_owner=20))
    await queue.ensure_group()
    body = SynthesisRequest(text="One more of the flood.")
    flooders = [f"203.0.113.{n}" for n in range(1, 5)]
    held: dict[str, list[str]] = {source: [] for source in flooders}

    async def flood() -> None:
        for _ in range(25):
            for n, source in enumerate(flooders):
                try:
                    submitted = await queue.enqueue(body, f"cookie-{n}", source=source)
                except QueueError:
                    continue
                held[source].append(submitted.job_id)

    await flood()
    assert sum(map(len, held.values())) < 20, held  # room left besides them
    for n in range(3):
        assert (await queue.enqueue(body, f"honest-{n}", source="198.51.100.9")).job_id
    await flood()  # the flood again, with one more owner waiting: still room for another
    assert (await queue.enqueue(body, "honest-too", source="198.51.100.10")).job_id


async def test_a_job_cancelled_before_it_ran_leaves_the_operators_index_with_its_record(
    settings: Settings, aredis: Redis
) -> None:
    """Its record lives CHATTTS_UNSTARTED_TTL_S: its entry in the search index goes at once, not
    a day later (a flood of submit-then-cancel once kept a day of index entries)."""
    queue = Queue(aredis, settings)
    await queue.ensure_group()
    kept = await queue.enqueue(SynthesisRequest(text="Kept."), "cookie-a")
    gone = await queue.enqueue(SynthesisRequest(text="Never mind."), "cookie-a")
    index = f"{queue.keys.base}:index"
    assert await aredis.zscore(index, gone.job_id) is not None
    assert (await queue.cancel(gone.job_id, "cookie-a"))[0] == "cancelled"
    assert await aredis.zscore(index, gone.job_id) is None
    assert await aredis.zscore(index, kept.job_id) is not None


async def test_high_priority_is_for_api_keys(settings: Settings, aredis: Redis) -> None:
    """A protocol may ask "high" for anyone; the queue keeps it for API keys' clients."""
    queue = Queue(aredis, settings)
    urgent = SynthesisRequest(text="Urgent.", priority="high")
    keyed = await queue.enqueue(urgent, "key-ops", source="203.0.113.7")
    anonymous = await queue.enqueue(urgent, "cookie-a", source="203.0.113.7")
    kept = await queue.get(keyed.job_id)
    lowered = await queue.get(anonymous.job_id)
    assert kept is not None and kept.request.priority == "high"
    assert lowered is not None and lowered.request.priority == "normal"
