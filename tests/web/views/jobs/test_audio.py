"""A job's audio and segments (web/views/jobs/audio.py): a segment not made yet is said so at
once, before any memory is reserved for it."""

from __future__ import annotations

from aiohttp.test_utils import TestClient

from tests.web.conftest import submit
from web.appkeys import MEMORY


async def test_a_segment_not_made_yet_takes_no_memory(client: TestClient) -> None:
    job = await submit(client, text="Nobody is working yet.")  # no worker: it stays queued
    memory = client.app[MEMORY]
    memory.take("10.9.9.9", memory.total_bytes, "another address's download")
    try:  # the budget is full: a reservation would be refused 503
        answer = await client.get(f"/v1/tts/jobs/{job['id']}/segments/1")
        error = (await answer.json())["error"]
        assert answer.status == 404 and error["code"] == "segment_not_ready"
        assert answer.headers["Retry-After"] == "1" and "0 of ? done" in error["message"]
    finally:
        memory.give("10.9.9.9", memory.total_bytes)
