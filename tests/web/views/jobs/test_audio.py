"""A job's audio and segments (web/views/jobs/audio.py): a segment not made yet is said so at
once, before any memory is reserved for it; a one-segment job's segment is sent as its file is."""

from __future__ import annotations

import asyncio

from aiohttp.test_utils import TestClient

from tests.conftest import ClientFactory, WorkerProcess
from tests.web.conftest import submit, wait_job
from web.appkeys import MEMORY
from web.replies.sending import PIECE_BYTES


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


async def test_a_one_segment_jobs_segment_is_sent_as_its_file_a_piece_at_a_time(
    make_client: ClientFactory, worker: WorkerProcess
) -> None:
    """A one-segment job's segment is its whole file: sent from the store a piece at a time as
    its file is, never held whole, so that two at once fit a budget of three pieces."""
    client = await make_client(web_memory_per_address_bytes=3 * PIECE_BYTES)
    text = (
        "A single sentence that runs on and on, said slowly, long enough to make a file of "
        "well over half a megabyte, yet short enough to stay one segment of the job."
    )
    job = await submit(client, text=text, voice="en_male", format="wav", speed=0.5)
    done = await wait_job(client, job["id"], ("succeeded",), timeout=30)
    assert done["audio_size"] > PIECE_BYTES and done.get("segments_total", 1) == 1, done
    whole = await (await client.get(f"/v1/tts/jobs/{job['id']}/audio")).read()
    answers = await asyncio.gather(
        *(client.get(f"/v1/tts/jobs/{job['id']}/segments/1") for _ in range(2))
    )
    for answer in answers:
        assert answer.status == 200, await answer.text()
        assert await answer.read() == whole
    ranged = await client.get(
        f"/v1/tts/jobs/{job['id']}/segments/1", headers={"Range": "bytes=0-9"}
    )
    assert ranged.status == 206 and await ranged.read() == whole[:10]
