"""`GET /v1/tts/jobs`: the caller's own jobs, newest first, a page at a time, by state; nobody
else's, and clear errors for what it does not take."""

from __future__ import annotations

from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestClient

from tests.web.conftest import submit
from web import job_service
from web.appkeys import THROUGHPUT
from web.monitors.store import ThroughputMeter

Client = TestClient[Any, Any]


async def test_my_jobs_newest_first_a_page_at_a_time(client: Client) -> None:
    ids = [(await submit(client, text=f"Job number {i}."))["id"] for i in range(5)]
    jar = aiohttp.CookieJar(unsafe=True)  # (keeps the cookies of an address like 127.0.0.1)
    async with aiohttp.ClientSession(cookie_jar=jar) as stranger:  # another client
        async with stranger.post(
            client.make_url("/v1/tts/jobs"), json={"text": "Not yours."}
        ) as response:
            theirs = (await response.json())["id"]
        async with stranger.get(client.make_url("/v1/tts/jobs")) as response:
            assert [j["id"] for j in (await response.json())["jobs"]] == [theirs]
    body = await (await client.get("/v1/tts/jobs")).json()
    assert [j["id"] for j in body["jobs"]] == ids[::-1] and body["next_cursor"] is None
    first = body["jobs"][0]
    assert first["state"] == "queued" and first["status_url"] == f"/v1/tts/jobs/{ids[-1]}"

    pages, cursor = [], None
    while True:
        query = "?limit=2" + (f"&cursor={cursor}" if cursor else "")
        page = await (await client.get(f"/v1/tts/jobs{query}")).json()
        pages.append([j["id"] for j in page["jobs"]])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert [i for p in pages for i in p] == ids[::-1] and all(len(p) <= 2 for p in pages)

    assert (await client.delete(f"/v1/tts/jobs/{ids[1]}")).status == 202
    cancelled = await (await client.get("/v1/tts/jobs?state=cancelled")).json()
    assert [j["id"] for j in cancelled["jobs"]] == [ids[1]]
    both = await (await client.get("/v1/tts/jobs?state=cancelled,succeeded")).json()
    assert [j["id"] for j in both["jobs"]] == [ids[1]]
    queued = await (await client.get("/v1/tts/jobs?state=queued")).json()
    assert ids[1] not in [j["id"] for j in queued["jobs"]] and len(queued["jobs"]) == 4


async def test_what_the_list_does_not_take_is_a_clear_400(client: Client) -> None:
    for query, code in (
        ("state=done", "invalid_state"),
        ("limit=0", "invalid_limit"),
        ("limit=101", "invalid_limit"),
        ("limit=ten", "invalid_limit"),
        ("cursor=yesterday", "invalid_cursor"),
        # What Python's digits take and Redis's ids do not: other scripts' digits, past 64 bits.
        ("limit=²", "invalid_limit"),
        ("cursor=١-١", "invalid_cursor"),
        ("cursor=99999999999999999999-0", "invalid_cursor"),
    ):
        response = await client.get(f"/v1/tts/jobs?{query}")
        body = await response.json()
        assert response.status == 400, (query, body)
        assert body["error"]["code"] == code and body["error"]["param"] == query.split("=")[0]


def test_the_estimated_start_is_the_jobs_ahead_at_the_fleets_completion_rate() -> None:
    now = [0.0]
    meter = ThroughputMeter(clock=lambda: now[0])
    app = web.Application()
    app[THROUGHPUT] = meter
    assert job_service.estimated_start(app, 10) is None
    for second in range(6):  # 4 jobs finished a second
        now[0] = float(second)
        meter.add(4 * second, 20)
    assert job_service.estimated_start(app, 10) == 2.5
    assert job_service.estimated_start(app, 0) == 0.0
    assert job_service.estimated_start(app, None) is None
