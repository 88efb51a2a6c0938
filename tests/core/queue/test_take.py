"""The fair scheduler's order, taken straight from Redis (lua/take.lua): clients alternate,
weights and lanes share by cost, a cancelled job leaves, and coming and going gains nothing."""

from __future__ import annotations

from collections import Counter

from redis.asyncio import Redis

from core.infra.settings import Settings
from core.queue.job import SynthesisRequest
from core.queue.lanes import KeyShare
from core.queue.results import Started
from core.queue.store import Queue

# About 1 s of speech each (12 characters a second): every job costs the same.
TEXT = "Twelve chars"


async def submit(
    queue: Queue, client: str, n: int, share: KeyShare | None = None, **request: object
) -> list[str]:
    ids = []
    for i in range(n):
        body = SynthesisRequest(text=f"{TEXT} {'abcdefghij'[i % 10]}", **request)  # type: ignore[arg-type]
        ids.append((await queue.enqueue(body, client, share=share)).job_id)
    return ids


async def order(queue: Queue, n: int) -> list[str]:
    """The clients of the next `n` jobs taken, one take at a time (as workers do)."""
    clients = []
    for _ in range(n):
        taken = await queue.work.take("w", 1)
        assert len(taken) == 1
        clients.append(taken[0][3])
    return clients


async def test_clients_alternate_whatever_their_backlog(settings: Settings, aredis: Redis) -> None:
    queue = Queue(aredis, settings)
    await queue.ensure_group()
    await submit(queue, "key-flood", 20)
    await submit(queue, "key-late", 3)
    assert await queue.depth() == 23
    taken = await order(queue, 8)
    # FIFO would give the flood all eight; fair order serves the late client every other job.
    assert taken[:6] == ["key-flood", "key-late"] * 3
    assert taken[6:] == ["key-flood"] * 2
    assert await queue.depth() == 23  # taken jobs hold stream entries until they end


async def test_a_weight_is_a_share(settings: Settings, aredis: Redis) -> None:
    queue = Queue(aredis, settings)
    await queue.ensure_group()
    await submit(queue, "key-small", 30)
    await submit(queue, "key-big", 30, share=KeyShare(weight=3))
    counts = Counter(await order(queue, 20))
    assert counts["key-big"] == 15 and counts["key-small"] == 5


async def test_cookie_clients_of_one_address_share_one_share(
    settings: Settings, aredis: Redis
) -> None:
    """Fresh cookies are fresh clients; fair share is per address for them, so minting cookies
    buys nothing against a keyed client."""
    queue = Queue(aredis, settings)
    await queue.ensure_group()
    for cookie in range(6):
        body = SynthesisRequest(text=TEXT)
        await queue.enqueue(body, f"cookie{cookie}", source="203.0.113.9")
    await submit(queue, "key-other", 6)
    taken = await order(queue, 6)
    assert Counter(taken)["key-other"] == 3


async def test_bulk_keeps_its_minimum_share_and_takes_what_is_left(
    settings: Settings, aredis: Redis
) -> None:
    settings = settings.replace(bulk_min_share=0.2)
    queue = Queue(aredis, settings)
    await queue.ensure_group()
    await submit(queue, "key-bulk", 30, priority="bulk")  # first in: FIFO would run it all first
    await submit(queue, "key-live", 12)
    first = Counter(await order(queue, 10))
    assert first["key-bulk"] == 2 and first["key-live"] == 8
    rest = Counter(await order(queue, 10))
    assert rest["key-live"] == 4 and rest["key-bulk"] == 6  # work-conserving once it has gone


async def test_a_cancelled_job_leaves_the_room(settings: Settings, aredis: Redis) -> None:
    queue = Queue(aredis, settings)
    await queue.ensure_group()
    (only,) = await submit(queue, "key-gone", 1)
    await submit(queue, "key-stays", 2)
    assert (await queue.cancel(only, "key-gone"))[0] == "cancelled"
    assert await queue.depth() == 2
    assert await order(queue, 2) == ["key-stays"] * 2
    assert await queue.work.take("w", 1) == []


async def test_coming_and_going_gains_nothing(settings: Settings, aredis: Redis) -> None:
    """A client whose list ran dry comes back at its old pass, not at the lane's clock (which
    would give it two turns in a row here)."""
    queue = Queue(aredis, settings)
    await queue.ensure_group()
    await submit(queue, "key-steady", 20)
    await submit(queue, "key-bursty", 3)
    assert Counter(await order(queue, 6))["key-bursty"] == 3  # served, its list now dry
    await submit(queue, "key-bursty", 3)  # back at once: it had its turns already
    assert await order(queue, 4) == ["key-bursty", "key-steady"] * 2


async def test_position_counts_the_rounds_ahead(settings: Settings, aredis: Redis) -> None:
    queue = Queue(aredis, settings)
    await queue.ensure_group()
    await submit(queue, "key-a", 5)
    body = SynthesisRequest(text=f"{TEXT} a")  # as long as submit's
    first = await queue.enqueue(body, "key-b")
    second = await queue.enqueue(body, "key-b")
    assert first.position == 1  # key-a's first job goes first (it came first, same pass)
    assert second.position == 3  # a round of both clients, then key-a again
    job = await queue.get(second.job_id)
    assert job is not None and await queue.position(job) == 3
    await order(queue, 2)
    assert await queue.position(job) == 1


async def test_a_position_deep_in_a_long_backlog_is_bounded_not_walked(
    settings: Settings, aredis: Redis
) -> None:
    """Looking a job up walks at most the first 256 of its client's list: deeper, its position
    is counted as the list's length (never fewer than it has ahead)."""
    queue = Queue(aredis, settings.replace(max_active_per_client=1000))
    await queue.ensure_group()
    ids = await submit(queue, "key-long", 400)
    near, deep = await queue.get(ids[10]), await queue.get(ids[-1])
    assert near is not None and deep is not None
    assert await queue.position(near) == 10
    assert await queue.position(deep) == 400  # 399 ahead, counted as the list's 400


async def test_fifo_takes_in_arrival_order(settings: Settings, aredis: Redis) -> None:
    queue = Queue(aredis, settings.replace(scheduler="fifo"))
    await queue.ensure_group()
    await submit(queue, "key-flood", 5)
    await submit(queue, "key-late", 1)
    assert await order(queue, 6) == ["key-flood"] * 5 + ["key-late"]


async def test_a_job_handed_back_after_a_cancel_request_ends_cancelled(
    settings: Settings, aredis: Redis
) -> None:
    """A cancel that lands while a worker gives its job back (a document's slice ended) ends
    the job: it does not wait in the room to run once more."""
    queue = Queue(aredis, settings)
    await queue.ensure_group()
    (job_id,) = await submit(queue, "key-a", 1)
    ((stream, entry, _, client),) = await queue.work.take("w", 1)
    started = await queue.work.start(job_id, entry, "w", stream, client)
    assert isinstance(started, Started)
    assert (await queue.cancel(job_id, "key-a"))[0] == "cancelling"
    assert await queue.work.release(job_id, "key-a", started.token, "", stream=stream)
    job = await queue.get(job_id)
    assert job is not None and job.state == "cancelled"
    assert await queue.depth() == 0 and await queue.work.take("w", 1) == []


async def test_a_job_handed_back_waits_first_in_its_client_s_list(
    settings: Settings, aredis: Redis
) -> None:
    queue = Queue(aredis, settings)
    await queue.ensure_group()
    first, second = await submit(queue, "key-a", 2)
    ((stream, entry, taken_id, client),) = await queue.work.take("w", 1)
    assert taken_id == first
    started = await queue.work.start(first, entry, "w", stream, client)
    assert isinstance(started, Started)
    assert await queue.work.release(first, "key-a", started.token, "", stream=stream)
    assert await queue.depth() == 2
    retaken = await queue.work.take("w2", 2)
    assert [t[2] for t in retaken] == [first, second]
    assert await queue.work.start(first, entry, "w", stream, client) == "skip:queued"  # old entry
    again = await queue.work.start(first, retaken[0][1], "w2", stream, client)
    assert isinstance(again, Started) and again.token != started.token  # a token per start
    assert await queue.work.renew(first, started.token, "w", stream) == "lost"
    assert again.attempt == 1  # handing back gave the delivery back


async def test_streams_go_first_while_a_worker_has_room_for_them(
    settings: Settings, aredis: Redis
) -> None:
    """Streams wait in their own lane: taken before other interactive work while the worker
    can carry one more, left for another worker when it cannot (other work goes on)."""
    queue = Queue(aredis, settings)
    await queue.ensure_group()
    await submit(queue, "key-plain", 3)
    streams = await submit(queue, "key-listener", 3, stream=True)
    reading = await queue.readings.queue()
    assert reading.waiting["stream"] == 3 and reading.waiting["interactive"] == 3
    for ahead, job_id in enumerate(streams):  # where each stands, in its queued event too
        events = await queue.events.after(queue.keys.job_events(job_id), None, 10)
        assert events[0][1]["type"] == "queued" and events[0][1]["position"] == ahead
    full = await queue.work.take("w", 2, stream_room=0)
    assert [t[3] for t in full] == ["key-plain"] * 2  # no room for a stream: the rest goes on
    one = await queue.work.take("w", 2, stream_room=1)
    assert [t[2] for t in one][:1] == streams[:1] and one[1][3] == "key-plain"
    rest = await queue.work.take("w", 5)
    assert [t[2] for t in rest] == streams[1:]
    assert (await queue.readings.queue()).waiting["stream"] == 0


async def test_long_streams_wait_their_turn_among_interactive_work(
    settings: Settings, aredis: Redis
) -> None:
    """Streams past CHATTTS_INTERACTIVE_MAX_S do not go first: twelve of one client once
    made every other client's short job wait for all of them."""
    queue = Queue(aredis, settings.replace(interactive_max_s=5))
    await queue.ensure_group()
    long_text = "A long story that goes on and on, read to a listener. " * 4  # about 18 s
    for _ in range(12):
        await queue.enqueue(SynthesisRequest(text=long_text, stream=True), "key-long-streams")
    short = await submit(queue, "key-short", 1)
    reading = await queue.readings.queue()
    assert reading.waiting["stream"] == 0 and reading.waiting["interactive"] == 13
    taken = await queue.work.take("w", 2)
    assert short[0] in [t[2] for t in taken]  # its turn comes in the first round
    await submit(queue, "key-short-stream", 1, stream=True)  # a short stream still goes first
    assert [t[3] for t in await queue.work.take("w", 1)] == ["key-short-stream"]


async def test_a_segment_made_again_is_charged_to_its_client(
    settings: Settings, aredis: Redis
) -> None:
    """A segment that failed its check and is made again costs its client's pass what a job of
    its length would: two clients alternate until one's remakes push it back."""
    queue = Queue(aredis, settings)
    await queue.ensure_group()
    await submit(queue, "key-a-remakes", 6)
    await submit(queue, "key-b-clean", 6)
    stream, entry, job_id, client = (await queue.work.take("w", 1))[0]
    assert client == "key-a-remakes"
    started = await queue.work.start(job_id, entry, "w", stream, client)
    assert isinstance(started, Started)
    for _ in range(3):  # three of its segments made again, a job's length each
        assert await queue.work.remake(job_id, started.token, 1.0)
    assert await order(queue, 4) == ["key-b-clean"] * 4  # it paid for three more jobs
    assert not await queue.work.remake(job_id, "a stale worker's token", 1.0)
