"""The HTTP API without workers: submission, validation, status, cancel, errors, identity."""

from __future__ import annotations

import asyncio
import hashlib
import re
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient

from core.infra.settings import Settings
from tests.conftest import ClientFactory
from tests.web.conftest import collect_sse, submit

Client = TestClient[Any, Any]


async def test_submit_answers_202_with_urls_cursor_and_snapshot(client: Client) -> None:
    response = await client.post("/v1/tts/jobs", json={"text": "你好，世界", "format": "mp3"})
    assert response.status == 202
    body = await response.json()
    job_id = body["id"]
    assert re.fullmatch(r"[0-9a-f]{32}", job_id)
    assert body["state"] == "queued"
    assert body["status_url"] == f"/v1/tts/jobs/{job_id}"
    assert body["audio_url"] == f"/v1/tts/jobs/{job_id}/audio"
    assert body["events_url"] == f"/v1/tts/jobs/{job_id}/events"
    assert re.fullmatch(r"\d+-\d+", body["events_cursor"])
    assert body["position"] == 0
    assert body["job"]["id"] == job_id and body["job"]["format"] == "mp3"
    assert "duplicate" not in body
    assert response.headers["Location"] == body["status_url"]
    assert response.headers["Content-Type"].startswith("application/json")

    status = await client.get(body["status_url"])
    assert status.status == 200
    job = await status.json()
    assert job["state"] == "queued" and job["voice"] == "zh_female" and job["position"] == 0
    assert job["audio_url"] == body["audio_url"]

    second = await submit(client, text="second")
    assert second["position"] == 1
    assert second["estimated_start_s"] is None  # nothing finished yet: no rate to go by


async def test_cleaned_text_is_what_gets_queued(client: Client, aredis: Any, keys: Any) -> None:
    body = await submit(client, text="\u200bHello\u202e\x00  world\n")
    stored = await aredis.hget(keys.job(body["id"]), "request")
    assert b'"text":"Hello world"' in stored


@pytest.mark.parametrize(
    ("payload", "status", "param", "code", "words"),
    [
        ({"text": ""}, 422, "text", "text_empty", "1 to 60"),
        ({"text": "\u200b\u200d\x07\u2066"}, 422, "text", "text_empty", "invisible"),
        ({"text": "字" * 61}, 413, "text", "text_too_long", "at most 60"),
        ({"text": "字" * 51, "stream": True}, 422, "stream", "document_stream", "progress"),
        ({"text": "?!…"}, 422, "text", "text_not_speakable", "letter or digit"),
        ({"text": "hi", "voice": "darth"}, 422, "voice", "unknown_voice", "zh_female"),
        ({"text": "hi", "format": "avi"}, 422, "format", "invalid_format", "'mp3'"),
        ({"text": 42}, 422, "text", "invalid_text", "valid string"),
        ({"text": "hi", "speed": 9}, 422, "speed", "invalid_speed", "2"),
        # Typed strictly: a number's string, 0/1 or "yes" for a boolean are refused.
        ({"text": "hi", "speed": "1.5"}, 422, "speed", "invalid_speed", "number"),
        ({"text": "hi", "stream": "yes"}, 422, "stream", "invalid_stream", "boolean"),
        ({"text": "hi", "cache": 0}, 422, "cache", "invalid_cache", "boolean"),
        ({"text": "hi", "seed": "7"}, 422, "seed", "invalid_seed", "integer"),
        ({"text": "hi", "colour": "red"}, 422, "colour", "unknown_field", "callback_url"),
        ({"voice": "zh_male"}, 422, "text", "missing_field", "required"),
        (["text"], 422, None, "invalid_body", "JSON object"),
    ],
)
async def test_validation_errors_name_the_field(
    make_client: ClientFactory,
    payload: Any,
    status: int,
    param: str | None,
    code: str,
    words: str,
) -> None:
    client = await make_client(max_text_chars=50, max_document_chars=60)
    response = await client.post("/v1/tts/jobs", json=payload)
    body = await response.json()
    assert response.status == status, body
    error = body["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert error["code"] == code
    assert words in error["message"]


async def test_openai_voice_names_work_on_jobs_by_the_texts_language(client: Client) -> None:
    english = await submit(client, text="Hello there.", voice="alloy")
    mandarin = await submit(client, text="你好，世界。", voice="Alloy")
    assert english["job"]["voice"] == "en_female" and mandarin["job"]["voice"] == "zh_female"
    assert (await submit(client, text="Hello.", voice="onyx"))["job"]["voice"] == "en_male_2"


async def test_body_errors(make_client: ClientFactory) -> None:
    client = await make_client(max_body_bytes=1000)
    response = await client.post(
        "/v1/tts/jobs", data=b'{"text": "hi",', headers={"Content-Type": "application/json"}
    )
    assert response.status == 400
    assert (await response.json())["error"]["code"] == "invalid_json"

    response = await client.post("/v1/tts/jobs", data={"text": "hi"})  # a form
    assert response.status == 415
    error = (await response.json())["error"]
    assert error["code"] == "unsupported_media_type" and "application/json" in error["message"]

    response = await client.post("/v1/tts/jobs", json={"text": "a" * 5000})
    assert response.status == 413
    error = (await response.json())["error"]
    assert error["code"] == "body_too_large" and "1000 bytes" in error["message"]

    # No Content-Length (chunked): aiohttp's own limit answers, in the same shape.
    async def chunks() -> Any:
        yield b'{"text": "'
        yield b"a" * 5000
        yield b'"}'

    response = await client.post(
        "/v1/tts/jobs", data=chunks(), headers={"Content-Type": "application/json"}
    )
    assert response.status == 413
    assert (await response.json())["error"]["code"] == "body_too_large"

    response = await client.post(
        "/v1/tts/jobs", data=b'"\xff\xfe"', headers={"Content-Type": "application/json"}
    )
    assert response.status == 400


async def test_unknown_ids_routes_and_methods(client: Client) -> None:
    missing = "0" * 32
    for method, path in [
        ("GET", f"/v1/tts/jobs/{missing}"),
        ("GET", f"/v1/tts/jobs/{missing}/audio"),
        ("GET", f"/v1/tts/jobs/{missing}/events"),
        ("GET", f"/v1/tts/jobs/{missing}/segments/1"),
        ("DELETE", f"/v1/tts/jobs/{missing}"),
        ("GET", "/v1/tts/jobs/not-a-job-id"),
        ("GET", "/v1/tts/jobs/*:x"),
    ]:
        response = await client.request(method, path)
        body = await response.json()
        assert response.status == 404, (method, path, body)
        assert body["error"]["code"] == "job_not_found"
        assert body["error"]["type"] == "not_found_error"

    response = await client.get("/v1/nothing-here")
    assert response.status == 404
    assert (await response.json())["error"]["code"] == "unknown_endpoint"

    response = await client.put("/v1/tts/jobs")
    assert response.status == 405
    assert "POST" in response.headers["Allow"]
    assert (await response.json())["error"]["code"] == "method_not_allowed"


async def test_idempotency_key_makes_one_job(client: Client) -> None:
    headers = {"Idempotency-Key": "order-42"}
    first = await client.post("/v1/tts/jobs", json={"text": "once"}, headers=headers)
    second = await client.post("/v1/tts/jobs", json={"text": "once"}, headers=headers)
    a, b = await first.json(), await second.json()
    assert first.status == second.status == 202
    assert a["id"] == b["id"] and b["duplicate"] is True and "duplicate" not in a
    assert b["status_url"] == a["status_url"] and b["state"] == "queued"
    assert b["events_cursor"] == a["events_cursor"]

    # The same key with another body is another request: refused, never the first job's audio.
    other = await client.post("/v1/tts/jobs", json={"text": "twice"}, headers=headers)
    assert other.status == 422
    error = (await other.json())["error"]
    assert error["code"] == "idempotency_key_reused" and a["id"] in error["message"]
    assert error["param"] == "Idempotency-Key" and "Retry-After" not in other.headers
    same_text_other_voice = {"text": "once", "voice": "en_male"}
    assert (
        await client.post("/v1/tts/jobs", json=same_text_other_voice, headers=headers)
    ).status == 422

    bad = await client.post("/v1/tts/jobs", json={"text": "x"}, headers={"Idempotency-Key": "é"})
    assert bad.status == 400
    assert (await bad.json())["error"]["param"] == "Idempotency-Key"


async def test_cancel_a_queued_job_and_audio_states(client: Client) -> None:
    body = await submit(client, text="never spoken")
    audio = await client.get(body["audio_url"])
    assert audio.status == 409
    assert audio.headers["Retry-After"] == "1"
    error = await audio.json()
    assert error["error"]["code"] == "not_ready" and error["state"] == "queued"

    response = await client.delete(body["status_url"])
    assert response.status == 202
    assert await response.json() == {"id": body["id"], "state": "cancelled"}

    again = await client.delete(body["status_url"])
    assert again.status == 409
    assert (await again.json())["error"]["code"] == "job_finished"

    audio = await client.get(body["audio_url"])
    assert audio.status == 409
    assert (await audio.json())["error"]["code"] == "job_cancelled"
    status = await (await client.get(body["status_url"])).json()
    assert status["state"] == "cancelled" and "position" not in status


async def test_backlog_full_is_429_with_retry_after(make_client: ClientFactory) -> None:
    client = await make_client(max_backlog=1)
    await submit(client, text="one")
    response = await client.post("/v1/tts/jobs", json={"text": "two"})
    assert response.status == 429
    assert int(response.headers["Retry-After"]) >= 1
    error = (await response.json())["error"]
    assert error["type"] == "rate_limit_error" and error["code"] == "backlog_full"


async def test_security_headers_and_identity_cookie(client: Client) -> None:
    response = await client.get("/healthz")
    assert response.status == 200 and await response.json() == {"status": "ok"}
    csp = response.headers["Content-Security-Policy"]
    assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Referrer-Policy"] == "no-referrer"
    cookie = response.cookies["tts_client"]
    assert cookie["httponly"] and cookie["samesite"] == "Lax"
    assert int(cookie["max-age"]) >= 364 * 86_400
    # The client keeps it: no new cookie on the next response.
    again = await client.get("/healthz")
    assert "tts_client" not in again.cookies

    error = await client.get("/v1/nothing")
    assert error.headers["X-Content-Type-Options"] == "nosniff"


async def test_api_keys_when_configured(make_client: ClientFactory) -> None:
    client = await make_client(api_keys="alpha, beta")
    for path in ("/v1/voices", "/tts/query/abc"):
        response = await client.get(path)
        assert response.status == 401
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
    body = await (await client.get("/v1/voices")).json()
    assert body["error"]["type"] == "authentication_error"
    wrong = await client.get("/v1/voices", headers={"Authorization": "Bearer gamma"})
    assert wrong.status == 401
    ok = await client.get("/v1/voices", headers={"Authorization": "Bearer beta"})
    assert ok.status == 200
    for path in ("/healthz", "/metrics", "/"):
        assert (await client.get(path)).status == 200, path


async def test_api_key_identity(make_client: ClientFactory, aredis: Any, keys: Any) -> None:
    client = await make_client(api_keys="my-secret")
    headers = {"Authorization": "Bearer my-secret"}
    response = await client.post("/v1/tts/jobs", json={"text": "hi"}, headers=headers)
    job_id = (await response.json())["id"]
    owner = (await aredis.hget(keys.job(job_id), "client")).decode()
    assert re.fullmatch(r"key-[0-9a-f]{16}", owner)
    # Keyed with the server's secret: a dictionary of likely keys finds nothing in key names.
    assert owner != "key-" + hashlib.sha256(b"my-secret").hexdigest()[:16]


async def test_without_keys_a_bearer_token_is_no_identity(
    client: Client, aredis: Any, keys: Any
) -> None:
    """Any string would be one: two programs sending the placeholder "unused" would share their
    jobs and events. Without keys, each is the client its signed cookie says."""
    headers = {"Authorization": "Bearer unused"}
    owners = []
    async with aiohttp.ClientSession() as first, aiohttp.ClientSession() as second:
        for session in (first, second):
            url = client.make_url("/v1/tts/jobs")
            async with session.post(url, json={"text": "hi"}, headers=headers) as response:
                job_id = (await response.json())["id"]
            owners.append((await aredis.hget(keys.job(job_id), "client")).decode())
    assert owners[0] != owners[1]
    assert not any(o.startswith("key-") for o in owners)


async def test_a_made_up_cookie_is_a_new_client(client: Client, aredis: Any, keys: Any) -> None:
    """Cookies are signed: a well-formed value the server did not issue is not an identity."""
    url = client.make_url("/v1/tts/jobs")

    async def owner_of(cookie_value: str) -> tuple[str, str | None]:
        # A session of its own (no cookie jar): exactly this Cookie header is sent.
        headers = {"Cookie": f"tts_client={cookie_value}"}
        async with (
            aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as session,
            session.post(url, json={"text": "hi"}, headers=headers) as response,
        ):
            job_id = (await response.json())["id"]
            issued = response.cookies.get("tts_client")
        owner = (await aredis.hget(keys.job(job_id), "client")).decode()
        return owner, issued.value if issued else None

    owner, issued = await owner_of("victims-cookie-0000001")
    assert "victims-cookie-0000001" not in owner
    assert issued is not None and "." in issued and issued not in owner  # never the cookie
    assert (await owner_of(issued))[0] == owner  # the cookie it issued is that client
    tampered = issued[:-2] + ("xx" if not issued.endswith("xx") else "yy")
    assert (await owner_of(tampered))[0] != owner


async def test_voices_without_workers_lists_builtins(client: Client) -> None:
    body = await (await client.get("/v1/voices")).json()
    names = [v["name"] for v in body["voices"]]
    assert {"zh_female", "zh_male", "en_female", "en_male"} <= set(names)
    assert body["default"] == "zh_female" and body["engines"] == [] and body["workers"] == 0


async def test_registered_voice_is_listed_and_accepted(
    client: Client, aredis: Any, keys: Any
) -> None:
    await aredis.hset(
        keys.voices, "narrator", '{"language": "en-US", "embedding": "' + "x" * 5000 + '"}'
    )
    body = await (await client.get("/v1/voices")).json()
    narrator = next(v for v in body["voices"] if v["name"] == "narrator")
    assert narrator["builtin"] is False and narrator["language"] == "en-US"
    assert "embedding" not in narrator
    job = await submit(client, text="hello", voice="narrator")
    assert job["job"]["voice"] == "narrator"
    # An unknown name is answered with the built-ins and this client's own voices (listing
    # every registered one would tell each client what the others registered): GET /v1/voices
    # has the rest.
    response = await client.post("/v1/tts/jobs", json={"text": "hi", "voice": "nobody"})
    message = (await response.json())["error"]["message"]
    assert "zh_female" in message and "GET /v1/voices" in message


async def test_readyz_needs_a_worker_and_metrics_count(client: Client, settings: Settings) -> None:
    response = await client.get("/readyz")
    assert response.status == 503
    body = await response.json()
    assert body["redis"] is True and body["workers"] == 0 and body["status"] == "not_ready"

    await submit(client, text="counted")
    text = await (await client.get("/metrics")).text()
    assert "chattts_jobs_submitted_total 1.0" in text
    assert 'chattts_http_requests_total{method="POST",route="jobs",status="202"} 1.0' in text
    assert "chattts_queue_backlog_jobs 1.0" in text
    assert 'chattts_queue_waiting_jobs{lane="interactive"} 1.0' in text
    # The figure KEDA scales the workers on (docker/k8s/keda.yaml: backlog.waiting).
    for _ in range(50):  # the throughput meter samples once a second
        detail = await (await client.get("/readyz")).json()
        if detail["backlog"]["waiting"] == 1:
            break
        await asyncio.sleep(0.1)
    assert detail["backlog"]["waiting"] == 1
    assert "chattts_sse_connections 0.0" in text
    # A streamed job waits in the stream lane: the second figure KEDA scales on.
    await submit(client, text="streamed", stream=True)
    detail = await (await client.get("/readyz")).json()
    assert detail["streams"] == {
        "capacity": 0,  # no worker: nothing carried
        "playing": 0,
        "waiting": 1,
        "workers_below_realtime": 0,
    }
    text = await (await client.get("/metrics")).text()
    assert 'chattts_queue_waiting_jobs{lane="stream"} 1.0' in text
    assert "chattts_streams_waiting 1.0" in text and "chattts_streams_capacity 0.0" in text


async def test_page_renders_with_settings(make_client: ClientFactory) -> None:
    client = await make_client(max_text_chars=1234)
    response = await client.get("/")
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/html")
    assert "1234" in (await response.text()).replace(",", "")
    assert "script-src 'self'" in response.headers["Content-Security-Policy"]


async def test_key_weights_place_a_key_s_jobs(
    make_client: ClientFactory, aredis: Any, keys: Any
) -> None:
    """CHATTTS_KEY_WEIGHTS reaches the scheduler: a key's weight, and its class's lane; a job
    that asks for bulk, and a document, wait in the bulk lane."""
    client = await make_client(api_keys="big,batch,plain", key_weights="big=3,batch=1:bulk")

    async def placed(key: str, **body: Any) -> tuple[bytes, bytes]:
        headers = {"Authorization": f"Bearer {key}"}
        response = await client.post("/v1/tts/jobs", json={"text": "hi", **body}, headers=headers)
        assert response.status == 202, await response.text()
        job_id = (await response.json())["id"]
        lane, weight = await aredis.hmget(keys.job(job_id), ["lane", "weight"])
        return lane, weight

    assert await placed("big") == (b"i", b"3.0")
    assert await placed("batch") == (b"b", b"1.0")
    assert await placed("plain") == (b"i", b"1.0")
    assert await placed("plain", priority="bulk") == (b"b", b"1.0")


async def test_flags_are_booleans_everywhere(client: Client) -> None:
    """`cached`, `document` and `cancel_requested` are JSON booleans, always present, in the
    submit answer's snapshot, a job's snapshot and its events' (never "0", true in an `if`)."""
    body = await submit(client, text="flags")
    flags = ("cached", "document", "cancel_requested")
    assert all(body["job"][flag] is False for flag in flags), body["job"]
    snapshot = await (await client.get(body["status_url"])).json()
    assert all(snapshot[flag] is False for flag in flags), snapshot
    assert (await client.delete(body["status_url"])).status == 202
    events = await collect_sse(await client.get(body["events_url"]))
    jobs = [event.json()["job"] for event in events]
    assert jobs[0]["cancel_requested"] is False
    assert all(isinstance(job[flag], bool) for job in jobs for flag in flags), jobs


async def test_text_the_voices_cannot_read_is_taken_and_told(client: Client) -> None:
    japanese = await submit(client, text="こんにちは、世界。")
    assert any("Japanese kana" in w for w in japanese["warnings"]), japanese
    assert "warnings" not in await submit(client, text="Hello there.")
