"""The event hub and `follow`: register first, replay, follow live, survive a pub/sub kill."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import orjson
from redis.asyncio import Redis

from core.infra.settings import Settings
from core.queue.job import SynthesisRequest
from core.queue.keys import Keys
from core.queue.store import Queue
from tests.web.conftest import cookie, sse_events
from web.appkeys import COOKIE_SECRET
from web.clients.identity import cookie_client
from web.hub import EventHub, follow


async def _hub(settings: Settings, keys: Keys) -> EventHub:
    hub = EventHub(settings, keys)
    await hub.start()
    async with asyncio.timeout(5):
        await hub.connected.wait()
    return hub


async def _append(aredis: Redis, stream: str, kind: str) -> str:
    """An event as the Lua scripts write it: stream entry, then the doorbell."""
    data = orjson.dumps({"type": kind, "ts": time.time(), "job": {"state": kind}})
    entry: Any = await aredis.xadd(stream, {"data": data})
    await aredis.publish(stream.split(":ev:", 1)[0] + ":n", stream)
    return str(entry.decode())


async def test_follow_replays_then_follows_live(
    settings: Settings, keys: Keys, aredis: Redis
) -> None:
    hub = await _hub(settings, keys)
    queue = Queue(aredis, settings)
    stream = keys.client_events("someone")
    first = await _append(aredis, stream, "queued")
    got: list[tuple[str, str]] = []

    async def consume() -> None:
        async with contextlib.aclosing(follow(queue, hub, stream, None, poll_s=30)) as events:
            async for stream_id, event in events:
                got.append((stream_id, event["type"]))

    task = asyncio.create_task(consume())
    try:
        second = await _append(aredis, stream, "running")
        third = await _append(aredis, stream, "succeeded")
        async with asyncio.timeout(5):  # poll_s=30: only doorbells can deliver this fast
            while len(got) < 3:
                await asyncio.sleep(0.01)
        assert got == [(first, "queued"), (second, "running"), (third, "succeeded")]
        assert hub.subscriber_count == 1
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await hub.stop()
    assert hub.subscriber_count == 0


async def test_follow_of_a_finished_job_ends(settings: Settings, keys: Keys, aredis: Redis) -> None:
    hub = await _hub(settings, keys)
    queue = Queue(aredis, settings)
    submitted = await queue.enqueue(SynthesisRequest(text="hi"), "c1")
    await queue.cancel(submitted.job_id)
    stream = keys.job_events(submitted.job_id)
    try:
        events = [e async for e in follow(queue, hub, stream, None, job_id=submitted.job_id)]
        assert [e["type"] for _, e in events] == ["queued", "cancelled"]
        # After its terminal event: nothing more, and it ends at once (no safety-poll wait).
        start = time.monotonic()
        rest = [e async for e in follow(queue, hub, stream, events[-1][0], job_id=submitted.job_id)]
        assert rest == [] and time.monotonic() - start < 1.0
        unknown = keys.job_events("f" * 32)
        gone = [e async for e in follow(queue, hub, unknown, None, job_id="f" * 32)]
        assert gone == []
    finally:
        await hub.stop()


async def test_pubsub_kill_loses_no_event(settings: Settings, keys: Keys, aredis: Redis) -> None:
    reconnects: list[int] = []
    hub = EventHub(settings, keys, on_reconnect=lambda: reconnects.append(1))
    await hub.start()
    queue = Queue(aredis, settings)
    stream = keys.client_events("victim")
    got: list[str] = []

    async def consume() -> None:
        async with contextlib.aclosing(follow(queue, hub, stream, None, poll_s=30)) as events:
            async for stream_id, _ in events:
                got.append(stream_id)

    task = asyncio.create_task(consume())
    try:
        async with asyncio.timeout(5):
            await hub.connected.wait()
        sent = [await _append(aredis, stream, "progress") for _ in range(3)]
        await aredis.client_kill_filter(_type="pubsub")
        sent += [await _append(aredis, stream, "progress") for _ in range(3)]
        # Doorbells of the last three may be lost; the reconnect wakes the follower, which
        # re-reads after its cursor (poll_s=30 rules out the safety poll doing it).
        async with asyncio.timeout(8):
            while got != sent:
                await asyncio.sleep(0.02)
        assert reconnects == [1]
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await hub.stop()


async def test_hub_stops_followers(settings: Settings, keys: Keys, aredis: Any) -> None:
    hub = await _hub(settings, keys)
    queue = Queue(aredis, settings)
    task = asyncio.create_task(
        asyncio.wait_for(anext(follow(queue, hub, keys.client_events("x"), None)), 10)
    )
    await asyncio.sleep(0.1)
    await hub.stop()
    start = time.monotonic()
    with contextlib.suppress(StopAsyncIteration):
        await task
    assert time.monotonic() - start < 1.0


async def test_sse_clients_get_every_event_across_pubsub_kills(
    client: Any, keys: Keys, aredis: Redis
) -> None:
    """Real SSE clients while events flow and the hub's pub/sub connection is killed again and
    again: each client gets every event once, in order, and soon after it was written."""
    auth = cookie(client, "pubsub-victim-0001")
    identity = cookie_client(client.app[COOKIE_SECRET], auth["Cookie"].partition("=")[2])
    stream = keys.client_events(identity)
    responses = [await client.get("/v1/events", headers=auth) for _ in range(5)]
    assert all(r.status == 200 for r in responses)
    got: list[list[str]] = [[] for _ in responses]

    async def read(i: int) -> None:
        async for event in sse_events(responses[i]):
            if event.id is not None:
                got[i].append(event.id)

    readers = [asyncio.create_task(read(i)) for i in range(len(responses))]
    sent: list[str] = []
    kills = 0
    try:
        await asyncio.sleep(0.2)  # the streams are registered with the hub
        for n in range(150):
            sent.append(await _append(aredis, stream, "progress"))
            await asyncio.sleep(0.01)
            if n % 30 == 15:
                kills += await aredis.client_kill_filter(_type="pubsub")
        async with asyncio.timeout(5):
            while any(len(g) < len(sent) for g in got):
                await asyncio.sleep(0.02)
        assert all(g == sent for g in got)
        assert kills >= 5
        metrics = await (await client.get("/metrics")).text()
        assert "chattts_hub_reconnects_total 0.0" not in metrics
    finally:
        for task in readers:
            task.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
        for response in responses:
            response.close()


async def test_a_bad_stream_does_not_stall_the_followers_read_with_it(
    settings: Settings, keys: Keys, aredis: Redis
) -> None:
    """Reads of one loop iteration share an XREAD: an entry that is not an event, or a key of
    the wrong type, fails its own follower only; the others get their events at once."""
    hub = await _hub(settings, keys)
    queue = Queue(aredis, settings)
    good = keys.client_events("good")
    not_an_event = keys.client_events("no-data")
    wrong_type = keys.client_events("a-string")
    await aredis.xadd(not_an_event, {"text": "no data field"})
    await aredis.set(wrong_type, "not a stream")
    first = await _append(aredis, good, "queued")

    async def first_event(stream: str) -> tuple[str, dict[str, Any]]:
        async with contextlib.aclosing(follow(queue, hub, stream, None, poll_s=30)) as events:
            async for item in events:
                return item
        raise AssertionError("the follow ended without an event")

    try:
        async with asyncio.timeout(5):
            results = await asyncio.gather(
                first_event(good),
                first_event(not_an_event),
                first_event(wrong_type),
                return_exceptions=True,
            )
        good_id, good_event = results[0]  # type: ignore[misc]
        assert good_id == first and good_event["type"] == "queued"
        assert isinstance(results[1], KeyError), results[1]
        assert "WRONGTYPE" in str(results[2]), results[2]
    finally:
        await hub.stop()
