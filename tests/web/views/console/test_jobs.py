"""The console's jobs and dead letters: search, a job's record, requeue (one, many, racing), purge,
against real web apps, Redis and worker processes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from aiohttp.test_utils import TestClient

from cli.sse import sse_events
from tests.conftest import ClientFactory, WorkerProcess
from tests.web.conftest import wait_job

Client = TestClient[Any, Any]
ADMIN_KEY = "root-key-1234"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}


async def _dead_jobs(
    client: Client, start_worker: Callable[..., WorkerProcess], texts: list[str]
) -> list[str]:
    """Jobs that a worker allowed no delivery gives up on at once: dead, in the dead letters."""
    ids = []
    for text in texts:
        response = await client.post("/v1/tts/jobs", json={"text": text, "voice": "en_male"})
        ids.append((await response.json())["id"])
    reaper = start_worker("reaper", CHATTTS_MAX_DELIVERIES="0")
    for job_id in ids:
        await wait_job(client, job_id, ("dead",))
    reaper.stop()
    return ids


async def test_a_dead_job_requeued_succeeds_for_its_own_client(
    make_client: ClientFactory, start_worker: Callable[..., WorkerProcess]
) -> None:
    client = await make_client(admin_keys=ADMIN_KEY)
    [job_id] = await _dead_jobs(client, start_worker, ["Give me another chance."])
    letters = (await (await client.get("/admin/v1/dlq", headers=ADMIN)).json())["dead_letters"]
    assert [(d["id"], d["requeueable"]) for d in letters] == [(job_id, True)]
    assert "deliveries" in letters[0]["reason"] and letters[0]["job"]["state"] == "dead"
    before = await (await client.get(f"/v1/tts/jobs/{job_id}")).json()
    dead = await (await client.get(f"/admin/v1/jobs/{job_id}", headers=ADMIN)).json()
    assert "deliveries" in dead["dead_letter"]["reason"] and dead["dead_letter"]["id"] == job_id
    assert [run.get("dead") for run in dead["runs"]] == [True]
    start_worker("healthy")
    response = await client.post(f"/admin/v1/dlq/{job_id}/requeue", headers=ADMIN)
    assert response.status == 200, await response.text()
    assert (await response.json())["requeued"] is True
    done = await wait_job(client, job_id, ("succeeded",))
    assert done["attempts"] == 1 and before["attempts"] == 0
    assert (await client.get(f"/v1/tts/jobs/{job_id}/audio")).status == 200
    # Its own client hears it start again, and end: the same identity as before.
    stream = await client.get("/v1/events")  # from the start of its client's stream
    kinds = []
    async with asyncio.timeout(10):
        async for event in sse_events(stream):
            kinds.append(event.event)
            if event.event == "succeeded":
                break
    stream.close()
    assert kinds[kinds.index("dead") + 1 :][:1] == ["queued"] and kinds[-1] == "succeeded"
    assert (await (await client.get("/admin/v1/dlq", headers=ADMIN)).json())["dead_letters"] == []
    record = await (await client.get(f"/admin/v1/jobs/{job_id}", headers=ADMIN)).json()
    assert [run["worker"] for run in record["runs"]] == ["reaper", "healthy"]
    assert record["job"]["requeued_by"] == "admin …1234" and record["job"]["state"] == "succeeded"
    assert [e["type"] for e in record["events"]].count("queued") == 2
    assert record["job"]["request"]["text"] == "Give me another chance."
    listed, cursor = [], ""  # a page a job: the requeue is no second submission on a later page
    for _ in range(3):
        page = await (await client.get(f"/v1/tts/jobs?limit=1&cursor={cursor}")).json()
        listed += [j["id"] for j in page["jobs"]]
        if (cursor := page["next_cursor"]) is None:
            break
    assert listed == [job_id]
    assert record["links"]["audio_url"].endswith(f"/v1/tts/jobs/{job_id}/audio")
    assert "token" not in record["job"]
    # Operators see a cookie client by a digest: its id is its cookie, a credential.
    cookie = client.session.cookie_jar.filter_cookies(client.make_url("/"))["tts_client"].value
    assert record["job"]["client"].startswith("cookie-")
    usage = await (await client.get("/admin/v1/usage", headers=ADMIN)).text()
    for shown in (json.dumps(record), json.dumps(letters), usage):
        assert cookie not in shown and cookie.split(".")[0] not in shown


async def test_two_requeues_racing_make_one_job(
    make_client: ClientFactory, start_worker: Callable[..., WorkerProcess]
) -> None:
    first = await make_client(admin_keys=ADMIN_KEY)
    second = await make_client(admin_keys=ADMIN_KEY)  # another web process, the same queue
    [job_id] = await _dead_jobs(first, start_worker, ["Only once, please."])
    answers = await asyncio.gather(
        first.post(f"/admin/v1/dlq/{job_id}/requeue", headers=ADMIN),
        second.post("/admin/v1/dlq/requeue", json={"ids": [job_id]}, headers=ADMIN),
    )
    one = answers[0].status == 200
    many = (await answers[1].json())["results"][0]
    assert one != many["requeued"], (answers[0].status, many)  # exactly one of them requeued
    if not one:
        assert (await answers[0].json())["error"]["code"] == "job_not_dead"
    else:
        assert many["error"] == "job_not_dead"
    start_worker("healthy")
    await wait_job(first, job_id, ("succeeded",))
    record = await (await first.get(f"/admin/v1/jobs/{job_id}", headers=ADMIN)).json()
    kinds = [e["type"] for e in record["events"]]
    assert kinds == ["queued", "dead", "queued", "running", "succeeded"]  # requeued once
    audit = (await (await first.get("/admin/v1/audit", headers=ADMIN)).json())["audit"]
    assert [a["action"] for a in audit] == ["dlq.requeue"]


async def test_requeue_refuses_what_is_not_dead(
    make_client: ClientFactory, worker: WorkerProcess
) -> None:
    client = await make_client(admin_keys=ADMIN_KEY)
    job = await (await client.post("/v1/tts/jobs", json={"text": "I am fine."})).json()
    await wait_job(client, job["id"], ("succeeded",))
    response = await client.post(f"/admin/v1/dlq/{job['id']}/requeue", headers=ADMIN)
    body = await response.json()
    assert response.status == 409 and body["error"]["code"] == "job_not_dead"
    assert body["state"] == "succeeded"
    unknown = await client.post(f"/admin/v1/dlq/{'0' * 32}/requeue", headers=ADMIN)
    assert unknown.status == 404 and (await unknown.json())["error"]["code"] == "job_not_found"
    for body in ({"ids": []}, {"ids": ["nope"]}, {"all": False}, []):
        response = await client.post("/admin/v1/dlq/requeue", json=body, headers=ADMIN)
        assert response.status == 400, body
    assert (await client.post("/admin/v1/dlq/requeue", json={"all": True})).status == 401


async def test_many_requeued_and_the_rest_purged(
    make_client: ClientFactory, start_worker: Callable[..., WorkerProcess]
) -> None:
    client = await make_client(admin_keys=ADMIN_KEY)
    ids = await _dead_jobs(client, start_worker, [f"Dead job {i}." for i in range(4)])
    purged = await client.post("/admin/v1/dlq/purge", json={"ids": ids[:1]}, headers=ADMIN)
    assert (await purged.json()) == {"removed": 1}
    page = await (await client.get("/admin/v1/dlq?limit=2", headers=ADMIN)).json()
    assert len(page["dead_letters"]) == 2 and page["next_cursor"]
    rest = await client.get(f"/admin/v1/dlq?cursor={page['next_cursor']}", headers=ADMIN)
    listed = page["dead_letters"] + (await rest.json())["dead_letters"]
    assert sorted(d["id"] for d in listed) == sorted(ids[1:])
    requeued = await client.post("/admin/v1/dlq/requeue", json={"ids": ids[1:3]}, headers=ADMIN)
    assert (await requeued.json())["requeued"] == 2 and (await requeued.json())["more"] is False
    assert (
        await client.post("/admin/v1/dlq/purge", json={"all": True}, headers=ADMIN)
    ).status == 200
    assert (await (await client.get("/admin/v1/dlq", headers=ADMIN)).json())["dead_letters"] == []
    start_worker("healthy")
    for job_id in ids[1:3]:
        await wait_job(client, job_id, ("succeeded",))
    # The purged ones stay dead, readable by their id until they expire.
    assert (await (await client.get(f"/v1/tts/jobs/{ids[3]}")).json())["state"] == "dead"
    for cursor in (";drop", "99999999999999999999-0", "١-١"):  # Redis would refuse the last two
        bad = await client.get(f"/admin/v1/dlq?cursor={cursor}", headers=ADMIN)
        assert bad.status == 400, cursor


async def test_jobs_are_searched_by_state_client_voice_time_and_text(
    make_client: ClientFactory, worker: WorkerProcess
) -> None:
    client = await make_client(admin_keys=ADMIN_KEY, api_keys="alpha-1111")
    alpha = {"Authorization": "Bearer alpha-1111"}
    made = []
    for text, voice, headers in (
        ("The quick brown fox.", "en_male", alpha),
        ("A lazy dog sleeps.", "en_female", alpha),
        ("Foxes are quick too.", "en_female", ADMIN),
    ):
        response = await client.post(
            "/v1/tts/jobs", json={"text": text, "voice": voice}, headers=headers
        )
        made.append(await response.json())
    for job in made:
        await wait_job(client, job["id"], ("succeeded",), headers=ADMIN)

    async def found(query: str) -> list[str]:
        response = await client.get(f"/admin/v1/jobs?{query}", headers=ADMIN)
        assert response.status == 200, await response.text()
        return [j["id"] for j in (await response.json())["jobs"]]

    ids = [j["id"] for j in made]
    assert await found("") == ids[::-1]  # newest first
    assert await found("text=FOX") == [ids[2], ids[0]]
    assert await found("voice=en_female") == [ids[2], ids[1]]
    assert await found("state=succeeded,failed&voice=en_male") == [ids[0]]
    assert await found("state=queued") == []
    record = await (await client.get(f"/admin/v1/jobs/{ids[0]}", headers=ADMIN)).json()
    owner = record["job"]["client"]
    assert await found(f"client={owner}") == [ids[1], ids[0]]
    created = float(record["job"]["created_at"])
    assert await found(f"until={created}") == []
    assert await found(f"since={created}&until={created + 0.0001}") == [ids[0]]
    first = await (await client.get("/admin/v1/jobs?limit=2", headers=ADMIN)).json()
    assert [j["id"] for j in first["jobs"]] == ids[:0:-1]
    assert await found(f"cursor={first['next_cursor']}") == [ids[0]]
    for query in ("state=lost", "limit=0", "since=yesterday", "text=" + "x" * 201):
        response = await client.get(f"/admin/v1/jobs?{query}", headers=ADMIN)
        assert response.status == 400, query
    missing = await client.get(f"/admin/v1/jobs/{'0' * 32}", headers=ADMIN)
    assert missing.status == 404


async def test_a_requeued_document_whose_parts_expired_starts_afresh(
    make_client: ClientFactory, start_worker: Callable[..., WorkerProcess], aredis: Any, keys: Any
) -> None:
    """A document resumes after its stored parts only while they are all kept: a requeue long
    after it died (its parts expired before its record) reads it whole again."""
    client = await make_client(admin_keys=ADMIN_KEY, max_text_chars=200)
    text = " ".join(f"Sentence {i} of a document that dies and comes back." for i in range(8))
    response = await client.post("/v1/tts/jobs", json={"text": text, "voice": "en_male"})
    job_id = (await response.json())["id"]
    reaper = start_worker("reaper", CHATTTS_MAX_DELIVERIES="0", CHATTTS_MAX_TEXT_CHARS="200")
    await wait_job(client, job_id, ("dead",))
    reaper.stop()
    # As if two parts had been stored and had expired since.
    await aredis.hset(keys.job(job_id), mapping={"segments_done": 2, "samples_done": 48_000})
    start_worker("healthy", CHATTTS_MAX_TEXT_CHARS="200")
    assert (await client.post(f"/admin/v1/dlq/{job_id}/requeue", headers=ADMIN)).status == 200
    # Its runs ended badly: the next one runs alone, taking no healthy job down with it.
    assert await aredis.hget(keys.job(job_id), "suspect") == b"1"
    done = await wait_job(client, job_id, ("succeeded",), timeout=60)
    assert done["segments_done"] == done["segments_total"] > 2
    assert await aredis.llen(keys.parts(job_id)) == done["segments_total"]


async def test_a_requeued_jobs_followers_see_its_new_run(
    make_client: ClientFactory, start_worker: Callable[..., WorkerProcess]
) -> None:
    """Following a requeued job from its start (SSE without a cursor, WebSocket `after: null`)
    replays its death, then goes on with its new run to its new end: it did not stay dead."""
    client = await make_client(admin_keys=ADMIN_KEY)
    [job_id] = await _dead_jobs(client, start_worker, ["Dead once, then alive again."])
    response = await client.post(f"/admin/v1/dlq/{job_id}/requeue", headers=ADMIN)
    assert response.status == 200
    stream = await client.get(f"/v1/tts/jobs/{job_id}/events")  # the README's way: no cursor
    async with client.ws_connect("/v1/ws") as ws:
        await ws.send_json({"op": "subscribe", "job_id": job_id, "after": None})
        start_worker("healthy")
        async with asyncio.timeout(20):
            kinds = [event.event async for event in sse_events(stream)]
            frames: list[str] = []
            while not frames or frames[-1] != "succeeded":  # its subscription's end, after it
                frame = await ws.receive_json()
                if frame.get("type") == "event":
                    frames.append(frame["event"]["type"])
    stream.close()
    for seen in (kinds, frames):
        assert "dead" in seen and seen[-1] == "succeeded", seen
        assert seen[seen.index("dead") + 1] == "queued", seen
