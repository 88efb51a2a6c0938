"""Scripts of one event loop's callers written together (core/queue/pipelined.py), on a real Redis:
each caller gets its own reply, a script's error stays its caller's, a script Redis has
forgotten is loaded again, and a connection that breaks mid-batch loses no caller's work."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from core.infra.settings import Settings
from core.queue.job import SynthesisRequest
from core.queue.pipelined import Pipelined
from core.queue.store import Queue

ECHO = "redis.call('INCR', KEYS[1]); return {ARGV[1], redis.call('GET', KEYS[1])}"
FAILS_ON_X = "if ARGV[1] == 'x' then return redis.error_reply('no x') end return ARGV[1]"


async def test_each_caller_gets_its_own_reply_from_one_write(aredis: Redis) -> None:
    """Forty callers in one turn of the loop: one batch (the counter shows forty commands ran,
    once each), each caller's reply its own."""
    pipelined = Pipelined(aredis)
    script = aredis.register_script(ECHO)
    await aredis.delete("pipelined:n")
    await script(keys=["pipelined:n"], args=["warm"])  # Redis knows the script
    replies = await asyncio.gather(
        *(pipelined.run(script, ["pipelined:n"], [f"caller-{i}"]) for i in range(40))
    )
    assert [reply[0] for reply in replies] == [f"caller-{i}".encode() for i in range(40)]
    assert sorted(int(reply[1]) for reply in replies) == list(range(2, 42))
    assert int(await aredis.get("pipelined:n")) == 41


async def test_a_scripts_error_is_its_callers_alone(aredis: Redis) -> None:
    pipelined = Pipelined(aredis)
    script = aredis.register_script(FAILS_ON_X)
    await script(keys=["pipelined:any"], args=["warm"])
    outcomes = await asyncio.gather(
        *(pipelined.run(script, ["pipelined:any"], [arg]) for arg in ("a", "x", "b")),
        return_exceptions=True,
    )
    assert outcomes[0] == b"a" and outcomes[2] == b"b"
    assert isinstance(outcomes[1], ResponseError) and "no x" in str(outcomes[1])


async def test_a_forgotten_script_is_loaded_again(aredis: Redis) -> None:
    """After SCRIPT FLUSH (a restarted or promoted server) every caller still gets its reply:
    redis-py's path loads the script."""
    pipelined = Pipelined(aredis)
    script = aredis.register_script(ECHO)
    await aredis.script_flush()
    replies = await asyncio.gather(
        *(pipelined.run(script, ["pipelined:flushed"], [str(i)]) for i in range(5))
    )
    assert [reply[0] for reply in replies] == [str(i).encode() for i in range(5)]


async def test_a_broken_connection_loses_no_submission(settings: Settings, aredis: Redis) -> None:
    """The connections of the queue's client are killed while submissions are in flight: every
    submission is answered, and each one's job exists exactly once."""
    client = Redis.from_url(settings.redis.redis_url or "", client_name="pipelined-broken")
    queue = Queue(client, settings)
    try:
        await queue.enqueue(SynthesisRequest(text="warm"), "c-broken")
        submissions = [
            queue.enqueue(SynthesisRequest(text=f"number {i}"), "c-broken", idempotency_key=str(i))
            for i in range(30)
        ]

        async def kill_soon() -> None:  # the queue's connections, no one else's
            await asyncio.sleep(0)
            for connection in await aredis.client_list():
                if connection.get("name") == "pipelined-broken":
                    await aredis.client_kill_filter(_id=connection["id"])

        done = await asyncio.gather(*submissions, kill_soon())
        ids = {submitted.job_id for submitted in done[:30]}
        assert len(ids) == 30
        assert await aredis.scard(queue.keys.active("c-broken")) == 31
    finally:
        await client.aclose()


@pytest.mark.parametrize("count", [1, 3])
async def test_submissions_through_the_queue_take_the_pipelined_path(
    settings: Settings, aredis: Redis, count: int
) -> None:
    queue = Queue(aredis, settings)
    assert queue._scripts._pipelined is not None  # one server: the submit path shares writes
    done = await asyncio.gather(
        *(queue.enqueue(SynthesisRequest(text=f"text {i}"), f"c-p{count}") for i in range(count))
    )
    assert len({submitted.job_id for submitted in done}) == count
    assert [s.position for s in done] == list(range(count))  # each behind the one before
