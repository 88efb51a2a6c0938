"""The console's queue, workers, usage and audit, against real web apps, Redis and workers."""

from __future__ import annotations

import asyncio
import csv
import io
import time
from collections.abc import Callable
from typing import Any

from aiohttp.test_utils import TestClient

from tests.conftest import ClientFactory, WorkerProcess
from tests.web.conftest import wait_job

Client = TestClient[Any, Any]
ADMIN_KEY = "root-key-1234"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}", "X-Operator": "dana"}
LONG = " ".join(f"Sentence {i} keeps the worker busy for a moment." for i in range(40))


async def _admin(make_client: ClientFactory, **changes: Any) -> Client:
    return await make_client(admin_keys=ADMIN_KEY, **changes)


async def test_a_pause_refuses_every_kind_of_submission_on_every_web_process(
    make_client: ClientFactory, worker: WorkerProcess
) -> None:
    first, second = await _admin(make_client), await _admin(make_client)
    running = await (
        await first.post("/v1/tts/jobs", json={"text": LONG, "voice": "en_male"})
    ).json()
    queued = await (
        await first.post("/v1/tts/jobs", json={"text": "Then me.", "voice": "en_male"})
    ).json()
    paused = await first.post(
        "/admin/v1/queue/pause",
        json={"reason": "upgrading Redis", "retry_after_s": 120},
        headers=ADMIN,
    )
    assert paused.status == 200, await paused.text()
    # The other process refuses at once: the pause is read in the submission's own script.
    for path, body in (
        ("/v1/tts/jobs", {"text": "Refused."}),
        ("/v1/audio/speech", {"model": "tts-1", "voice": "alloy", "input": "Refused."}),
        ("/tts/submit", {"text": "Refused."}),
    ):
        response = await second.post(path, json=body)
        assert response.status == 503, (path, await response.text())
        assert response.headers["Retry-After"] == "120"
        text = await response.text()
        assert "paused" in text and "upgrading Redis" in text
    # What was accepted before goes on.
    assert (await wait_job(first, running["id"], ("succeeded",), timeout=60))[
        "state"
    ] == "succeeded"
    assert (await wait_job(first, queued["id"], ("succeeded",)))["state"] == "succeeded"
    view = await (await second.get("/admin/v1/queue", headers=ADMIN)).json()
    assert (
        view["paused"]["reason"] == "upgrading Redis"
        and view["paused"]["by"] == "admin …1234 (dana)"
    )
    resumed = await second.post("/admin/v1/queue/resume", headers=ADMIN)
    assert (await resumed.json()) == {"paused": None, "was_paused": True}
    assert (await first.post("/v1/tts/jobs", json={"text": "Open again."})).status == 202
    audit = (await (await first.get("/admin/v1/audit", headers=ADMIN)).json())["audit"]
    assert [(a["action"], a["by"]) for a in audit[:2]] == [
        ("queue.resume", "admin …1234 (dana)"),
        ("queue.pause", "admin …1234 (dana)"),
    ]
    assert audit[1]["detail"] == "upgrading Redis" and audit[0]["ts"] >= audit[1]["ts"]


async def test_a_pause_is_refused_a_bad_body(make_client: ClientFactory) -> None:
    client = await _admin(make_client)
    for body in ({"retry_after_s": 0}, {"reason": 5}, {"for": "ever"}, ["x"]):
        response = await client.post("/admin/v1/queue/pause", json=body, headers=ADMIN)
        assert response.status == 400, body
    assert (await (await client.get("/admin/v1/queue", headers=ADMIN)).json())["paused"] is None


async def test_workers_are_listed_and_one_is_drained(
    make_client: ClientFactory,
    start_worker: Callable[..., WorkerProcess],
    aredis: Any,
    keys: Any,
) -> None:
    client = await _admin(make_client)
    keep, drained = start_worker("keep"), start_worker("drained")
    listed = (await (await client.get("/admin/v1/workers", headers=ADMIN)).json())["workers"]
    assert [w["name"] for w in listed] == ["drained", "keep"]
    for w in listed:
        assert w["engine"] == "espeak" and w["device"] == "cpu" and w["state"] == "ready"
        assert w["in_hand"] == 0 and w["host"] and w["pid"] > 0
        assert set(w["streams"]) == {"capacity", "playing"}
    # Long enough to be seen in hand on a quiet machine too (eSpeak made this WAV in 0.2 s,
    # under one heartbeat): twice the text, encoded to MP3.
    body = {"text": " ".join([LONG, LONG]), "voice": "en_male", "format": "mp3"}
    job = await (await client.post("/v1/tts/jobs", json=body)).json()
    holder = None
    deadline = time.monotonic() + 20
    while holder is None and time.monotonic() < deadline:
        listed = (await (await client.get("/admin/v1/workers", headers=ADMIN)).json())["workers"]
        holder = next((w["name"] for w in listed if job["id"] in (w["holding"] or [])), None)
        await asyncio.sleep(0.05)
    assert holder is not None, "no worker's heartbeat named the job it holds"
    target = {"keep": keep, "drained": drained}[holder]
    response = await client.post(f"/admin/v1/workers/{holder}/drain", headers=ADMIN)
    assert response.status == 202, await response.text()
    # It finishes what it holds, then exits 0; the job is not handed to anyone else.
    code = await asyncio.to_thread(target.process.wait, 30)
    assert code == 0, target.log()
    assert not await aredis.exists(keys.drain(holder))  # answered once: a restart is not drained
    record = await wait_job(client, job["id"], ("succeeded",), timeout=30)
    assert record["attempts"] == 1
    left = (await (await client.get("/admin/v1/workers", headers=ADMIN)).json())["workers"]
    assert [w["name"] for w in left] == [n for n in ("drained", "keep") if n != holder]
    missing = await client.post("/admin/v1/workers/nobody/drain", headers=ADMIN)
    assert missing.status == 404 and (await missing.json())["error"]["code"] == "worker_not_found"
    audit = (await (await client.get("/admin/v1/audit", headers=ADMIN)).json())["audit"]
    assert [(a["action"], a["target"]) for a in audit] == [("worker.drain", holder)]


async def test_usage_per_key_and_client_in_json_csv_and_metrics(
    make_client: ClientFactory, worker: WorkerProcess
) -> None:
    client = await _admin(make_client, api_keys="alpha-1111,beta-2222")
    texts = {"alpha-1111": ["One for alpha.", "Two for alpha."], "beta-2222": ["Beta speaks."]}
    ids = []
    for key, batch in texts.items():
        for text in batch:
            response = await client.post(
                "/v1/tts/jobs",
                json={"text": text, "voice": "en_female"},
                headers={"Authorization": f"Bearer {key}"},
            )
            ids.append((await response.json())["id"])
    for job_id in ids:
        await wait_job(client, job_id, ("succeeded",), headers=ADMIN)
    rows = (await (await client.get("/admin/v1/usage?days=2", headers=ADMIN)).json())["usage"]
    by_label = {r["label"]: r for r in rows}
    assert len(rows) == 2, rows
    alpha, beta = by_label["key …1111"], by_label["key …2222"]
    assert (alpha["jobs"], alpha["succeeded"]) == (2, 2)
    assert alpha["characters"] == sum(len(t) for t in texts["alpha-1111"])
    assert beta["characters"] == len("Beta speaks.") and beta["audio_seconds"] > 0.3
    assert alpha["day"] == time.strftime("%Y-%m-%d", time.gmtime())
    response = await client.get("/admin/v1/usage?days=2&format=csv", headers=ADMIN)
    assert response.content_type == "text/csv"
    parsed = list(csv.DictReader(io.StringIO(await response.text())))
    assert sorted(int(r["jobs"]) for r in parsed) == [1, 2]
    view = await (await client.get("/admin/v1/queue", headers=ADMIN)).json()
    assert view["counts"]["succeeded"] == 3 and view["counts"]["queued"] == 0
    # The minute under way counts at once: an operator sees the jobs that just ended.
    assert sum(m["jobs"] for m in view["minutes"]) == 3
    heard = sum(r["audio_seconds"] for r in rows)
    assert abs(sum(m["audio_s"] for m in view["minutes"]) - heard) < 0.01
    assert view["throughput"]["1m"]["jobs_per_s"] > 0 < view["throughput"]["15m"]["audio_s_per_s"]
    metrics = await (await client.get("/metrics")).text()
    assert f'chattts_usage_today_jobs{{client="{alpha["client"]}"}} 2.0' in metrics
    bad = await client.get("/admin/v1/usage?days=99", headers=ADMIN)
    assert bad.status == 400 and (await bad.json())["error"]["param"] == "days"


async def test_the_speech_heard_by_engine_and_voice(
    make_client: ClientFactory, start_worker: Callable[..., WorkerProcess]
) -> None:
    """Segments that were made again, and why, by engine and voice (from the heartbeats)."""
    client = await _admin(make_client)
    start_worker(CHATTTS_FAULT_AUDIO="loop", CHATTTS_HEARTBEAT_S="0.2")
    body = {"text": "The quick brown fox jumps over the lazy dog.", "voice": "en_female"}
    job = await (await client.post("/v1/tts/jobs", json=body)).json()
    await wait_job(client, job["id"], ("succeeded",), headers=ADMIN)
    deadline = time.monotonic() + 10
    while True:
        quality = (await (await client.get("/admin/v1/workers", headers=ADMIN)).json())["quality"]
        if (quality and quality[0]["heard"]) or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.1)
    assert quality == [
        {
            "engine": "espeak",
            "voice": "en_female",
            "heard": 1,
            "passed": 1,
            "failed": 0,
            "unheard": 0,
            "remade": 1,
            "reasons": {"loop": 1},
        }
    ]
