"""Callbacks (webhooks) with real parts: a real receiver on loopback that verifies signatures with
the spec's reference library, a real worker, the real sender in the web application; receivers
that fail, hang and refuse; forgery targets; a sender killed mid-delivery."""

from __future__ import annotations

import asyncio
import ipaddress
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from standardwebhooks import Webhook

from core.infra.embedded_redis import free_port
from core.infra.settings import Settings
from tests.conftest import ClientFactory, WorkerProcess
from tests.web.conftest import cookie
from tests.web.webproc import WebProcess, start_web
from web.callbacks.sender import IN_FLIGHT, IN_FLIGHT_PER_CLIENT
from web.callbacks.targets import refusal

__all__ = ["start_web"]  # a fixture
QUICK = {
    "callback_allow": "127.0.0.1/32",
    "callback_schedule_s": "0.2,0.2,0.2",
    "callback_timeout_s": 1.0,
}


@dataclass
class Receiver:
    """An HTTP server on loopback answering callbacks with the planned statuses in turn (the
    last repeats; 0 hangs until the test ends)."""

    plan: list[int]
    received: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    answered_2xx: int = 0
    url: str = ""
    hold_s: float = 0.0  # how long each answer takes

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.received.append((dict(request.headers), body))
        status = self.plan[min(len(self.received), len(self.plan)) - 1]
        if status == 0:
            await asyncio.sleep(3600)
        await asyncio.sleep(self.hold_s)
        if 200 <= status < 300:
            self.answered_2xx += 1
        return web.Response(status=status)

    async def wait_for(self, count: int, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while len(self.received) < count:
            assert time.monotonic() < deadline, f"{len(self.received)} callbacks, not {count}"
            await asyncio.sleep(0.02)


@pytest.fixture
async def receiver() -> AsyncIterator[Callable[[list[int]], Any]]:
    runners: list[web.AppRunner] = []

    async def start(plan: list[int]) -> Receiver:
        target = Receiver(plan)
        app = web.Application()
        app.router.add_post("/hook", target.handle)
        runner = web.AppRunner(app, shutdown_timeout=0.1)
        await runner.setup()
        port = free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        runners.append(runner)
        target.url = f"http://127.0.0.1:{port}/hook"
        return target

    yield start
    for runner in runners:
        await runner.cleanup()


async def job_state(client: TestClient[Any, Any], job_id: str, callback: str) -> dict[str, Any]:
    """The job once its callback reached `callback` (delivered or failed)."""
    deadline = time.monotonic() + 30
    while True:
        body: dict[str, Any] = await (await client.get(f"/v1/tts/jobs/{job_id}")).json()
        if body.get("callback") == callback:
            return body
        assert time.monotonic() < deadline, body
        await asyncio.sleep(0.05)


async def submit(
    client: TestClient[Any, Any], callback_url: str, headers: dict[str, str] | None = None
) -> aiohttp.ClientResponse:
    return await client.post(
        "/v1/tts/jobs",
        json={"text": "Call me back.", "voice": "en_male", "callback_url": callback_url},
        headers=headers,
    )


async def test_a_callback_arrives_signed_for_its_client_alone(
    make_client: ClientFactory, worker: WorkerProcess, receiver: Any
) -> None:
    target = await receiver([200])
    client = await make_client(**QUICK)
    response = await submit(client, target.url)
    assert response.status == 202, await response.text()
    job_id = (await response.json())["id"]
    await target.wait_for(1)
    headers, body = target.received[0]
    secret = (await (await client.get("/v1/callbacks/secret")).json())["secret"]
    event = Webhook(secret).verify(body, headers)  # the spec's reference library
    assert event["type"] == "job.succeeded" and event["data"]["job"]["id"] == job_id
    assert event["data"]["audio_url"].endswith(f"/v1/tts/jobs/{job_id}/audio")
    assert event["data"]["audio_url"].startswith("http://")
    assert headers["webhook-id"] == f"msg_{job_id}"
    # Another client's secret verifies nothing of this one's.
    async with aiohttp.ClientSession() as stranger:
        url = str(client.make_url("/v1/callbacks/secret"))
        other = (await (await stranger.get(url)).json())["secret"]
    assert other != secret
    with pytest.raises(Exception, match="signature"):
        Webhook(other).verify(body, headers)
    job = await job_state(client, job_id, "delivered")
    assert job["callback_attempts"] == 1 and "callback_url" not in job
    metrics = await (await client.get("/metrics")).text()
    assert 'chattts_callback_attempts_total{outcome="delivered"} 1.0' in metrics
    assert 'chattts_queue_callbacks_total{outcome="delivered"} 1.0' in metrics  # queue-wide


async def test_errors_are_retried_with_one_webhook_id_until_delivered(
    make_client: ClientFactory, worker: WorkerProcess, receiver: Any
) -> None:
    target = await receiver([500, 502, 503, 204])
    client = await make_client(**QUICK)
    job_id = (await (await submit(client, target.url)).json())["id"]
    job = await job_state(client, job_id, "delivered")
    assert job["callback_attempts"] == 4 and target.answered_2xx == 1
    assert {h["webhook-id"] for h, _ in target.received} == {f"msg_{job_id}"}
    assert len(target.received) == 4


async def test_more_callbacks_due_than_deliveries_at_once_wait_their_turn(
    make_client: ClientFactory, worker: WorkerProcess, receiver: Any
) -> None:
    """Every delivery slot busy: the sender waits for one to end (it once spun there, starving
    the web process's event loop) and the web tier answers meanwhile."""
    target = await receiver([200])
    target.hold_s = 2.0
    client = await make_client(**{**QUICK, "callback_timeout_s": 10.0})
    count = IN_FLIGHT + 8
    ids = [  # from many clients: one client's take at most IN_FLIGHT_PER_CLIENT of them
        (
            await (
                await submit(client, target.url, cookie(client, f"callback-client-{n:06d}"))
            ).json()
        )["id"]
        for n in range(count)
    ]
    await target.wait_for(IN_FLIGHT, timeout=60)
    started = time.monotonic()
    assert (await client.get("/healthz")).status == 200
    assert time.monotonic() - started < 1.0
    await target.wait_for(count, timeout=60)
    for job_id in ids:
        job = await job_state(client, job_id, "delivered")
        assert job["callback_attempts"] == 1
    assert len(target.received) == count


async def test_a_clients_receiver_that_never_answers_holds_up_only_its_own_callbacks(
    make_client: ClientFactory, worker: WorkerProcess, receiver: Any
) -> None:
    """Forty callbacks of one address to a receiver that hangs take four deliveries at a time,
    whatever cookies they came with (a fresh cookie is no fresh share); another address's
    callback goes out at once beside them (it once waited 103 s)."""
    black_hole, honest = await receiver([0]), await receiver([200])
    proxied = {**QUICK, "callback_timeout_s": 5.0, "trusted_proxies": "127.0.0.0/8"}
    client = await make_client(**proxied)
    for n in range(IN_FLIGHT + 8):
        flood = {**cookie(client, f"flooding-client-{n:02d}"), "X-Forwarded-For": "203.0.113.7"}
        assert (await submit(client, black_hole.url, flood)).status == 202
    await black_hole.wait_for(IN_FLIGHT_PER_CLIENT, timeout=30)
    started = time.monotonic()
    elsewhere = {**cookie(client, "honest-client-01"), "X-Forwarded-For": "198.51.100.2"}
    mine = await submit(client, honest.url, elsewhere)
    await job_state(client, (await mine.json())["id"], "delivered")
    assert time.monotonic() - started < 4.0  # inside one hanging attempt's timeout
    await asyncio.sleep(0.5)
    assert len(black_hole.received) <= 2 * IN_FLIGHT_PER_CLIENT  # four at a time, no more


@pytest.mark.parametrize("kind", ["hangs", "refuses"])
async def test_a_receiver_that_never_answers_fails_after_the_schedule(
    make_client: ClientFactory, worker: WorkerProcess, receiver: Any, kind: str
) -> None:
    if kind == "hangs":
        url = (await receiver([0])).url
        why = "no answer within 1 s"
    else:
        url = f"http://127.0.0.1:{free_port()}/hook"  # nothing listens there
        why = "connection failed"
    client = await make_client(**QUICK)
    started = time.monotonic()
    job_id = (await (await submit(client, url)).json())["id"]
    job = await job_state(client, job_id, "failed")
    assert job["callback_attempts"] == 4 and why in job["callback_error"]
    assert "gave up after 4 attempts" in job["callback_error"]
    # The web tier answered meanwhile: a hanging receiver holds up only its own callback.
    assert (await client.get("/healthz")).status == 200
    assert time.monotonic() - started < 30


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://127.0.0.1:9/hook", "loopback"),
        ("http://169.254.169.254/latest/meta-data", "link-local"),
        ("http://[::1]:9/hook", "loopback"),
        ("http://10.1.2.3/hook", "private"),
        ("ftp://example.com/hook", "http:// or https://"),
        ("/relative", "http:// or https://"),
        ("http://0x7f.1/hook", "four decimal numbers"),  # 127.0.0.1 to a resolver
        ("http://2130706433/hook", "four decimal numbers"),
        ("http://0177.0.0.1/hook", "four decimal numbers"),
    ],
)
async def test_forgery_targets_are_refused_at_submission(
    make_client: ClientFactory, url: str, says: str
) -> None:
    client = await make_client()  # no allowlist
    response = await submit(client, url)
    assert response.status == 422
    error = (await response.json())["error"]
    assert error["code"] == "invalid_callback_url" and says in error["message"]
    if "://" in says or "decimal" in says:
        return
    host = url.split("/")[2].rsplit(":", 1)[0].strip("[]")
    assert f"may not point at {host}: it is a" in error["message"], error["message"]


async def test_a_name_that_resolves_to_loopback_is_refused_when_connecting(
    make_client: ClientFactory, worker: WorkerProcess, receiver: Any
) -> None:
    target = await receiver([200])
    client = await make_client(callback_schedule_s="0.2", callback_timeout_s=1.0)
    url = target.url.replace("127.0.0.1", "localhost")  # a name: accepted, checked on connect
    response = await submit(client, url)
    assert response.status == 202, await response.text()
    job = await job_state(client, (await response.json())["id"], "failed")
    assert job["callback_attempts"] == 1 and "loopback" in job["callback_error"]
    # What the name resolved to is the server's business, not the submitter's.
    assert "127.0.0.1" not in job["callback_error"] and "::1" not in job["callback_error"]
    assert target.received == []  # never reached


async def test_a_sender_killed_mid_delivery_is_replaced_and_delivers_once(
    settings: Settings,
    start_web: Callable[..., WebProcess],
    worker: WorkerProcess,
    receiver: Any,
    tmp_path: Path,
) -> None:
    target = await receiver([0, 200])  # the first attempt hangs: its sender dies during it
    first = start_web(**QUICK, cookie_secret="callback-test-secret-0123456789")
    async with aiohttp.ClientSession() as session:
        body = {"text": "Call me back.", "voice": "en_male", "callback_url": target.url}
        async with session.post(f"{first.url}/v1/tts/jobs", json=body) as response:
            assert response.status == 202, await response.text()
            job_id = (await response.json())["id"]
        await target.wait_for(1)
        first.process.kill()
        first.process.wait()
        second = start_web(**QUICK, cookie_secret="callback-test-secret-0123456789")
        await target.wait_for(2)
        deadline = time.monotonic() + 30
        while True:
            async with session.get(f"{second.url}/v1/tts/jobs/{job_id}") as response:
                job = await response.json()
            if job.get("callback") == "delivered":
                break
            assert time.monotonic() < deadline, job
            await asyncio.sleep(0.05)
    assert target.answered_2xx == 1 and job["callback_attempts"] == 2
    assert [h["webhook-id"] for h, _ in target.received] == [f"msg_{job_id}"] * 2
    await asyncio.sleep(1.5)  # past a lease: nothing more arrives
    assert len(target.received) == 2


async def test_the_legacy_submit_takes_a_callback_too(
    make_client: ClientFactory, worker: WorkerProcess, receiver: Any
) -> None:
    target = await receiver([200])
    client = await make_client(**QUICK)
    body = {"text": "An old client.", "voice": "en_male", "callback_url": target.url}
    response = await client.post("/tts/submit", json=body)
    assert response.status == 200, await response.text()
    task_id = (await response.json())["task_id"]
    await target.wait_for(1)
    secret = (await (await client.get("/v1/callbacks/secret")).json())["secret"]
    event = Webhook(secret).verify(target.received[0][1], target.received[0][0])
    assert event["data"]["job"]["id"] == task_id
    refused = await client.post("/tts/submit", json={**body, "callback_url": "http://10.0.0.1/"})
    assert refused.status == 422 and "private" in (await refused.json())["detail"][0]["msg"]


@pytest.mark.parametrize(
    ("address", "allow", "refused"),
    [
        ("93.184.216.34", "", False),
        ("::ffff:127.0.0.1", "", True),  # IPv4-mapped loopback
        ("::127.0.0.1", "", True),  # IPv4-compatible
        ("64:ff9b::10.0.0.1", "", True),  # NAT64's well-known prefix, to a private address
        ("64:ff9b:1::a00:1", "", True),  # NAT64's local-use prefix
        ("64:ff9b::8.8.8.8", "", False),  # ... to a public one
        ("2002:7f00:1::1", "", True),  # 6to4 of 127.0.0.1
        ("2001:0:4136:e378:8000:63bf:80ff:fffe", "", True),  # Teredo, client 127.0.0.1
        ("::ffff:10.1.2.3", "10.0.0.0/8", False),  # the allowlist sees the address inside
        ("100.64.0.1", "", True),  # shared address space (carrier NAT)
        ("224.0.0.1", "", True),
        ("2001:4860:4860::8888", "", False),
        ("fd00::1", "", True),
        ("10.1.2.3", "10.0.0.0/8", False),
        ("10.1.2.3", "10.9.0.0/16", True),
    ],
)
def test_which_addresses_a_callback_may_reach(address: str, allow: str, refused: bool) -> None:
    reason = refusal(
        ipaddress.ip_address(address), Settings.of(callback_allow=allow).callbacks.allow_networks
    )
    assert (reason is not None) is refused, reason


async def test_jobs_cancelled_before_they_start_queue_no_callback(
    make_client: ClientFactory,
    start_worker: Callable[..., WorkerProcess],
    receiver: Any,
    aredis: Any,
    keys: Any,
) -> None:
    """Submit-and-cancel with a callback URL, many times: nothing is queued for them, so an
    honest job's callback goes out at once."""
    target = await receiver([200])
    client = await make_client(**QUICK)
    for _ in range(20):
        response = await submit(client, target.url)
        job_id = (await response.json())["id"]
        assert (await client.delete(f"/v1/tts/jobs/{job_id}")).status == 202
        assert "callback" not in await (await client.get(f"/v1/tts/jobs/{job_id}")).json()
    assert await aredis.zcard(keys.callbacks_due) == 0
    start_worker()
    honest = await submit(client, target.url)
    job = await job_state(client, (await honest.json())["id"], "delivered")
    assert job["callback_attempts"] == 1 and len(target.received) == 1
