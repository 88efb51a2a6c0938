"""The web process's memory budget: bounded in all and per address, released when given back,
and a waiter let in once room is freed."""

from __future__ import annotations

import asyncio

import pytest

from web.errors import ApiError
from web.monitors.memory import MemoryBudget, source_of


def test_bounds_per_address_and_in_all() -> None:
    budget = MemoryBudget(total_bytes=100, per_address_bytes=60)
    budget.take("a", 50, "x")
    with pytest.raises(ApiError) as mine:
        budget.take("a", 20, "a download")
    assert mine.value.status == 429 and mine.value.code == "too_much_in_flight"
    assert "a download" in mine.value.message and mine.value.headers["Retry-After"]
    budget.take("b", 45, "x")
    with pytest.raises(ApiError) as everyone:
        budget.take("c", 10, "x")
    assert everyone.value.status == 503 and everyone.value.code == "busy"
    budget.give("a", 50)
    budget.take("c", 10, "x")
    assert budget.held == 55 and budget.addresses == 2


def test_one_large_request_passes_alone_and_held_bytes_go_back() -> None:
    budget = MemoryBudget(total_bytes=100, per_address_bytes=60)
    with budget.hold("a", 500, "x"):  # larger than both bounds, but nothing else is held
        assert budget.held == 500
        with pytest.raises(ApiError):
            budget.take("b", 1, "x")
    assert budget.held == 0 and budget.addresses == 0
    with pytest.raises(RuntimeError), budget.hold("a", 10, "x"):
        raise RuntimeError("the handler failed")
    assert budget.held == 0


async def test_a_waiter_gets_in_when_room_is_freed_or_gives_up() -> None:
    budget = MemoryBudget(total_bytes=100, per_address_bytes=100)
    budget.take("a", 90, "x")
    waiting = asyncio.create_task(budget.wait_take("b", 50, "x", timeout_s=5))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    budget.give("a", 90)
    await asyncio.wait_for(waiting, 1)
    assert budget.held == 50
    with pytest.raises(ApiError):
        await budget.wait_take("c", 60, "x", timeout_s=0.1)
    budget.resize("b", 50, 20)
    assert budget.held == 20


def test_an_ipv6_host_counts_as_its_slash_64() -> None:
    assert source_of("2001:db8:1:2:aaaa::1") == source_of("2001:db8:1:2:ffff:1:2:3")
    assert source_of("2001:db8:1:2::1") == "2001:db8:1:2::/64"
    assert source_of("2001:db8:1:3::1") != source_of("2001:db8:1:2::1")
    assert source_of("::ffff:192.0.2.7") == source_of("192.0.2.7") == "192.0.2.7"
    assert source_of(None) == "unknown" and source_of("a-unix-socket") == "a-unix-socket"
