"""Real answers of the main routes, successes and errors, against the schemas `/openapi.json`
documents for them (status, media type, JSON Schema), from a real app, Redis and worker."""

from __future__ import annotations

import base64
from typing import Any

from aiohttp.test_utils import TestClient

from tests.conftest import ClientFactory, WorkerProcess
from tests.web.conftest import wait_job
from tests.web.views.service.openapi_check import check_answer

Client = TestClient[Any, Any]
ADMIN_KEY = "openapi-admin-key"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
JOB = "/v1/tts/jobs/{job_id}"


class Checked:
    """A client whose every answer is checked against the service's own document."""

    def __init__(self, client: Client, doc: dict[str, Any]) -> None:
        self.client, self.doc = client, doc

    async def call(
        self, method: str, route: str, status: int, at: dict[str, str] | None = None, **kw: Any
    ) -> Any:
        """`route` with the path parameters `at`; `kw` as aiohttp takes them (params: query)."""
        path = route.format(**(at or {}))
        response = await self.client.request(method, path, **kw)
        body = await response.read()
        assert response.status == status, (method, path, response.status, body[:300])
        content_type = response.headers.get("Content-Type", "")
        return check_answer(self.doc, method, route, status, content_type, body)


async def _checked(client: Client) -> Checked:
    return Checked(client, await (await client.get("/openapi.json")).json())


async def test_a_jobs_answers_from_submit_to_audio(
    make_client: ClientFactory, worker: WorkerProcess
) -> None:
    api = await _checked(await make_client())
    submitted = await api.call(
        "POST", "/v1/tts/jobs", 202, json={"text": "Hello there.", "format": "mp3"}
    )
    ids = {"job_id": submitted["id"]}
    await api.call("GET", JOB, 200, ids)
    await wait_job(api.client, ids["job_id"], ("succeeded",))
    assert (await api.call("GET", JOB, 200, ids))["state"] == "succeeded"
    await api.call("GET", "/v1/tts/jobs", 200, params={"state": "succeeded"})
    await api.call("GET", "/v1/tts/jobs", 400, params={"limit": "0"})
    await api.call("GET", JOB + "/audio", 200, ids)
    await api.call("GET", JOB + "/audio", 206, ids, headers={"Range": "bytes=0-9"})
    await api.call("GET", JOB + "/audio", 304, ids, headers={"If-None-Match": f'"{ids["job_id"]}"'})
    await api.call("GET", JOB + "/audio", 416, ids, headers={"Range": "bytes=99999999-"})
    await api.call("GET", JOB + "/segments/{n}", 200, {**ids, "n": "1"})
    for fmt in ("srt", "vtt", "json"):
        await api.call("GET", JOB + "/subtitles", 200, ids, params={"format": fmt})
    await api.call("GET", JOB + "/subtitles", 400, ids, params={"format": "ass"})
    await api.call("GET", JOB + "/events", 200, ids)
    await api.call("GET", JOB + "/stream", 409, ids)  # not submitted with "stream": true
    finished = await api.call("DELETE", JOB, 409, ids)
    assert finished["state"] == "succeeded"
    await api.call("GET", JOB, 404, {"job_id": "0" * 32})
    again = await api.call(
        "POST", "/v1/tts/jobs", 202, json={"text": "Hi."}, headers={"Idempotency-Key": "k-1"}
    )
    duplicate = await api.call(
        "POST", "/v1/tts/jobs", 202, json={"text": "Hi."}, headers={"Idempotency-Key": "k-1"}
    )
    assert duplicate["duplicate"] is True and duplicate["id"] == again["id"]
    cancelled = await api.call("DELETE", JOB, 202, {"job_id": again["id"]})
    assert cancelled["state"] in ("cancelled", "cancelling")


async def test_a_streamed_job_and_refusals(
    make_client: ClientFactory, worker: WorkerProcess
) -> None:
    api = await _checked(await make_client())
    streamed = await api.call("POST", "/v1/tts/jobs", 202, json={"text": "Hi.", "stream": True})
    await api.call("GET", JOB + "/stream", 200, {"job_id": streamed["id"]})
    await api.call("GET", JOB + "/stream", 400, {"job_id": streamed["id"]}, params={"offset": "1"})
    await api.call("POST", "/v1/tts/jobs", 422, json={"text": "Hi.", "voice": "nobody"})
    await api.call("POST", "/v1/tts/jobs", 422, json={"text": "Hi.", "colour": "blue"})
    await api.call(
        "POST", "/v1/tts/jobs", 400, data=b"{", headers={"Content-Type": "application/json"}
    )
    await api.call("POST", "/v1/tts/jobs", 415, data=b"text=Hi")
    await api.call("POST", "/v1/tts/jobs", 403, json={"text": "Hi.", "priority": "high"})
    await api.call("GET", "/v1/callbacks/secret", 200)


async def test_voices_openai_and_the_seed_era_api(
    make_client: ClientFactory, worker: WorkerProcess
) -> None:
    api = await _checked(await make_client())
    await api.call("GET", "/v1/voices", 200)
    await api.call("GET", "/v1/voices/{name}", 200, {"name": "en_female"})
    await api.call("GET", "/v1/voices/{name}", 404, {"name": "nobody"})
    await api.call("DELETE", "/v1/voices/{name}", 409, {"name": "en_female"})
    await api.call("POST", "/v1/voices", 422, json={"name": "Bad Name", "embedding": "x"})
    await api.call("GET", "/v1/models", 200)
    await api.call("GET", "/v1/audio/voices", 200)
    for fmt in ("mp3", "wav", "opus"):
        body = {"model": "tts-1", "input": "Hello.", "response_format": fmt}
        await api.call("POST", "/v1/audio/speech", 200, json=body)
    await api.call("POST", "/v1/audio/speech", 400, json={"model": "tts-1"})
    sse = {"model": "tts-1", "input": "Hi.", "stream_format": "sse"}
    await api.call("POST", "/v1/audio/speech", 200, json=sse)
    captioned = await api.call(
        "POST", "/dev/captioned_speech", 200, json={"model": "tts-1", "input": "Hello there."}
    )
    assert base64.b64decode(captioned["audio"])
    task = await api.call("POST", "/tts/submit", 200, json={"text": "Hello."})
    await api.call("GET", "/tts/query/{task_id}", 200, task)
    await wait_job(api.client, task["task_id"], ("succeeded",))
    done = await api.call("GET", "/tts/query/{task_id}", 200, task)
    assert done["status"] == "DONE"
    await api.call("GET", "/tts/query/{task_id}", 404, {"task_id": "nope"})
    problems = await api.call("POST", "/tts/submit", 422, json={"text": ""})
    assert problems["detail"][0]["loc"] == ["body", "text"]
    await api.call(
        "POST", "/tts/submit", 415, data=b"text=x", headers={"Content-Type": "text/plain"}
    )


async def test_the_service_and_the_console(
    make_client: ClientFactory, worker: WorkerProcess
) -> None:
    api = await _checked(await make_client(admin_keys=ADMIN_KEY))
    await api.call("GET", "/healthz", 200)
    await api.call("GET", "/readyz", 200)
    await api.call("GET", "/metrics", 200)
    await api.call("GET", "/openapi.json", 200)
    submitted = await api.call("POST", "/v1/tts/jobs", 202, json={"text": "For the console."})
    await wait_job(api.client, submitted["id"], ("succeeded",))
    await api.call("GET", "/admin/v1/queue", 401)
    await api.call("GET", "/admin/v1/queue", 403, headers={"Authorization": "Bearer wrong"})
    await api.call("POST", "/admin/session", 200, json={"key": ADMIN_KEY})
    for route in ("/admin/v1/queue", "/admin/v1/workers", "/admin/v1/audit", "/admin/v1/dlq"):
        await api.call("GET", route, 200, headers=ADMIN)
    await api.call("GET", "/admin/v1/usage", 200, headers=ADMIN)
    await api.call("GET", "/admin/v1/usage", 200, params={"format": "csv"}, headers=ADMIN)
    await api.call("GET", "/admin/v1/usage", 400, params={"days": "0"}, headers=ADMIN)
    await api.call("GET", "/admin/v1/jobs", 200, headers=ADMIN)
    await api.call(
        "GET", "/admin/v1/jobs/{job_id}", 200, {"job_id": submitted["id"]}, headers=ADMIN
    )
    ids = {"job_id": submitted["id"]}
    await api.call("POST", "/admin/v1/dlq/{job_id}/requeue", 409, ids, headers=ADMIN)
    await api.call(
        "POST", "/admin/v1/dlq/requeue", 200, json={"ids": [submitted["id"]]}, headers=ADMIN
    )
    await api.call("POST", "/admin/v1/dlq/purge", 200, json={"all": True}, headers=ADMIN)
    await api.call("POST", "/admin/v1/dlq/purge", 400, json={"all": {}}, headers=ADMIN)
    await api.call("POST", "/admin/v1/queue/pause", 200, json={"reason": "a test"}, headers=ADMIN)
    await api.call("POST", "/v1/tts/jobs", 503, json={"text": "Paused?"})
    await api.call("POST", "/tts/submit", 503, json={"text": "Paused?"})
    await api.call("POST", "/admin/v1/queue/resume", 200, headers=ADMIN)
    await api.call(
        "POST",
        "/admin/v1/queue/pause",
        400,
        data=b"null",
        headers={**ADMIN, "Content-Type": "application/json"},
    )
    await api.call("POST", "/admin/v1/workers/{name}/drain", 404, {"name": "nobody"}, headers=ADMIN)
    await api.call("DELETE", "/admin/session", 200)
