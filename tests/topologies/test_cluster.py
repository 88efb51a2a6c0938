"""The whole service on a three-master Redis Cluster: submit, SSE, WebSocket, cancel, reclaim
after a worker is killed; two queues on two shards, each with its own worker and web process."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis
from redis.crc import key_slot

from core.infra.redis_client import RedisClient, connect
from core.infra.settings import Settings
from core.queue.keys import Keys
from core.queue.store import Queue
from testing.topologies import Cluster
from tests.conftest import WorkerProcess
from tests.support.followers import TEXT as LONG_TEXT
from tests.support.followers import SseReader, WsReader, wait_until
from tests.support.jobs import wait_running, wait_terminal
from tests.support.voices import EMBEDDING
from tests.topologies.conftest import StartService
from tests.web.webproc import WebProcess

KEY = "cluster-test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
ADMIN = {"Authorization": "Bearer cluster-admin-key"}


@pytest.fixture
def redis_url(cluster: Cluster) -> str:
    return cluster.url


def queues_on_distinct_shards(cluster: Cluster, count: int) -> list[str]:
    """Queue names whose hash tags land on `count` different masters."""
    found: dict[int, str] = {}
    while len(found) < count:
        name = f"q{uuid.uuid4().hex[:8]}"
        found.setdefault(cluster.node_of(Keys(queue=name).jobs).port, name)
    return list(found.values())


def commandstats(cluster: Cluster) -> dict[int, dict[str, int]]:
    """Calls of PUBLISH and SPUBLISH per node (commands run by scripts included)."""
    out: dict[int, dict[str, int]] = {}
    for node in cluster.nodes:
        client = redis.Redis(port=node.port, password=cluster.password)
        try:
            stats: Any = client.info("commandstats")
        finally:
            client.close()
        out[node.port] = {
            name: int(stats.get(f"cmdstat_{name}", {}).get("calls", 0))
            for name in ("publish", "spublish")
        }
    return out


@pytest.fixture
def services(settings: Settings, tmp_path: Path) -> Iterator[list[Any]]:
    started: list[Any] = []
    yield started
    for process in reversed(started):
        process.stop()


async def submit(session: aiohttp.ClientSession, web: WebProcess, text: str) -> dict[str, Any]:
    async with session.post(
        f"{web.url}/v1/tts/jobs", json={"text": text, "voice": "en_male"}, headers=AUTH
    ) as response:
        body: dict[str, Any] = await response.json()
        assert response.status == 202, body
        return body


async def test_the_service_runs_on_a_cluster(
    cluster: Cluster,
    settings: Settings,
    tmp_path: Path,
    services: list[Any],
    start_service: StartService,
) -> None:
    name_a, name_b = queues_on_distinct_shards(cluster, 2)
    node_a, node_b = (
        cluster.node_of(Keys(queue=name_a).jobs),
        cluster.node_of(Keys(queue=name_b).jobs),
    )
    assert node_a.port != node_b.port
    settings_a = settings.replace(queue=name_a, api_keys=KEY, admin_keys="cluster-admin-key")
    settings_b = settings.replace(queue=name_b, api_keys=KEY)
    web_a, worker_a = start_service(settings_a, "a1")
    before = commandstats(cluster)
    client: RedisClient = connect(settings_a)
    queue_a = Queue(client, settings_a)
    async with aiohttp.ClientSession(headers=AUTH) as session:
        # Submit, then follow the job over SSE and over a WebSocket to its end.
        job = await submit(session, web_a, "Hello from a Redis Cluster.")
        sse = SseReader(
            await session.get(f"{web_a.url}/v1/tts/jobs/{job['id']}/events", headers=AUTH),
            job["id"],
        )
        ws = await session.ws_connect(f"{web_a.url}/v1/ws", headers=AUTH)
        await ws.send_json({"op": "subscribe", "job_id": job["id"], "after": None})
        ws_reader = WsReader(ws, job["id"])
        await wait_until(
            lambda: sse.ended_at is not None and ws_reader.ended_at is not None, 30, "no end seen"
        )
        assert sse.events[-1][1] == "succeeded" and ws_reader.events[-1][1] == "succeeded"
        assert [e[0] for e in sse.events] == [e[0] for e in ws_reader.events]
        await ws.close()
        async with session.get(f"{web_a.url}/v1/tts/jobs/{job['id']}/audio") as audio:
            assert audio.status == 200 and (await audio.read())[:4] == b"RIFF"
        # Voices: registered by a script, deleted in a transaction, both in the queue's slot.
        voice = {"name": "cluster-voice", "embedding": EMBEDDING}
        async with session.post(f"{web_a.url}/v1/voices", json=voice) as registered:
            assert registered.status == 201, await registered.text()
        async with session.delete(f"{web_a.url}/v1/voices/cluster-voice") as deleted:
            assert deleted.status == 200 and (await deleted.json())["deleted"] is True
        # The console: intake paused and resumed (transactions in the queue's slot), its views.
        url = f"{web_a.url}/admin/v1"
        async with session.post(f"{url}/queue/pause", json={"reason": "x"}, headers=ADMIN) as r:
            assert r.status == 200, await r.text()
        async with session.post(f"{web_a.url}/v1/tts/jobs", json={"text": "Later."}) as r:
            assert r.status == 503 and (await r.json())["error"]["code"] == "paused"
        async with session.post(f"{url}/queue/resume", headers=ADMIN) as r:
            assert (await r.json())["was_paused"] is True
        async with session.get(f"{url}/jobs?text=redis+cluster", headers=ADMIN) as r:
            assert [j["id"] for j in (await r.json())["jobs"]] == [job["id"]]
        for view in ("queue", "usage", "audit", "dlq", "workers", f"jobs/{job['id']}"):
            async with session.get(f"{url}/{view}", headers=ADMIN) as r:
                assert r.status == 200, (view, await r.text())
        async with session.post(f"{url}/dlq/purge", json={"all": True}, headers=ADMIN) as r:
            assert (await r.json()) == {"removed": 0}
        async with session.get(f"{web_a.url}/metrics") as metrics:
            assert metrics.status == 200
            assert 'chattts_jobs_total{outcome="succeeded"} 1.0' in await metrics.text()
        readiness = await (await session.get(f"{web_a.url}/readyz")).json()
        topology = readiness["topology"]
        assert topology["shape"] == "cluster" and topology["slots_covered"] is True
        assert topology["primary"] == node_a.address and topology["masters"] == 3

        # Doorbells by sharded pub/sub, on queue A's shard only; no broadcast PUBLISH anywhere.
        after = commandstats(cluster)
        grew = {port for port in after if after[port]["spublish"] > before[port]["spublish"]}
        assert grew == {node_a.port}
        assert all(after[p]["publish"] == before[p]["publish"] for p in after)

        # A worker killed mid-job: another takes the job over once its lease lapses.
        long_job = await submit(session, web_a, LONG_TEXT)
        assert await wait_running(queue_a, long_job["id"]) == "a1"
        worker_a.kill()
        rescuer = WorkerProcess(settings_a, "a2", tmp_path / "a2.log")
        services.append(rescuer)
        events = await wait_terminal(queue_a, long_job["id"], timeout=60)
        assert [e["type"] for e in events if e["type"] in ("succeeded", "dead")] == ["succeeded"]
        stored = await queue_a.get(long_job["id"])
        assert stored is not None and stored.attempts == 2

        # Queue B on another shard: a job cancelled before any worker runs, then one that runs.
        web_b = WebProcess(settings_b, tmp_path / "web-b.log")
        services.append(web_b)
        web_b.wait_ready()
        waiting = await submit(session, web_b, "Nobody will read this sentence.")
        async with session.delete(f"{web_b.url}/v1/tts/jobs/{waiting['id']}", headers=AUTH) as r:
            assert r.status == 202, await r.text()
            assert (await r.json())["state"] == "cancelled"
        worker_b = WorkerProcess(settings_b, "b1", tmp_path / "b1.log")
        services.append(worker_b)
        worker_b.wait_ready()
        served = await submit(session, web_b, "Hello from the second shard.")
        queue_b = Queue(client, settings_b)
        events = await wait_terminal(queue_b, served["id"], timeout=30)
        assert events[-1]["type"] == "succeeded"
        cancelled = await queue_b.get(waiting["id"])
        assert cancelled is not None and cancelled.state == "cancelled"
    # Each queue's keys live on its own shard.
    assert key_slot(queue_a.keys.job(job["id"]).encode()) == key_slot(queue_a.keys.jobs.encode())
    assert cluster.node_of(queue_b.keys.job(served["id"])).port == node_b.port
    await client.aclose()
