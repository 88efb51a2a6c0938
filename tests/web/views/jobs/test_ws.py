"""The WebSocket: submit, events, subscribe with a cursor, cancel, bad frames, origins."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
from aiohttp.test_utils import TestClient

from tests.conftest import ClientFactory, WorkerProcess
from tests.web.conftest import submit, wait_job

Client = TestClient[Any, Any]


async def _until(ws: aiohttp.ClientWebSocketResponse, kind: str, timeout: float = 20) -> Any:
    async with asyncio.timeout(timeout):
        while True:
            frame = await ws.receive_json()
            if frame["type"] == kind:
                return frame


async def _job_events(
    ws: aiohttp.ClientWebSocketResponse, job_id: str, timeout: float = 20
) -> list[dict[str, Any]]:
    """Event frames of one job until its terminal one."""
    out: list[dict[str, Any]] = []
    async with asyncio.timeout(timeout):
        while True:
            frame = await ws.receive_json()
            if frame["type"] == "event" and frame["job_id"] == job_id:
                out.append(frame)
                if frame["event"]["type"] in ("succeeded", "failed", "cancelled", "dead"):
                    return out


async def test_submit_and_follow(client: Client, worker: WorkerProcess) -> None:
    async with client.ws_connect("/v1/ws") as ws:
        await ws.send_json({"op": "ping"})
        assert (await ws.receive_json())["type"] == "pong"
        await ws.send_json(
            {"op": "submit", "ref": {"n": 1}, "request": {"text": "你好", "voice": "zh_male"}}
        )
        submitted = await ws.receive_json()
        assert submitted["type"] == "submitted" and submitted["ref"] == {"n": 1}
        job = submitted["job"]
        assert job["state"] == "queued" and job["status_url"].endswith(job["id"])
        frames = await _job_events(ws, job["id"])
        types = [f["event"]["type"] for f in frames if f["event"]["type"] != "progress"]
        assert types == ["queued", "running", "succeeded"]
        ids = [f["id"] for f in frames]
        assert len(set(ids)) == len(ids)

        # Subscribing again with a cursor replays only what follows it.
        await ws.send_json({"op": "subscribe", "job_id": job["id"], "after": ids[0]})
        again = await _job_events(ws, job["id"])
        assert [f["id"] for f in again] == ids[1:]
    audio = await client.get(job["audio_url"])
    assert audio.status == 200 and len(await audio.read()) > 1000


async def test_cancel_over_the_socket(client: Client) -> None:
    async with client.ws_connect("/v1/ws") as ws:
        await ws.send_json({"op": "submit", "ref": "a", "request": {"text": "no worker here"}})
        job = (await _until(ws, "submitted"))["job"]
        await ws.send_json({"op": "cancel", "ref": "c", "job_id": job["id"]})
        frames: list[dict[str, Any]] = []
        async with asyncio.timeout(10):
            while not frames or frames[-1].get("event", {}).get("type") != "cancelled":
                frames.append(await ws.receive_json())
        reply = next(f for f in frames if f["type"] == "cancel")
        assert reply == {"type": "cancel", "ref": "c", "job_id": job["id"], "state": "cancelled"}
        events = [f["event"]["type"] for f in frames if f["type"] == "event"]
        assert events == ["queued", "cancelled"]
        await ws.send_json({"op": "cancel", "ref": "d", "job_id": job["id"]})
        error = await _until(ws, "error")
        assert error["ref"] == "d" and error["error"]["code"] == "job_finished"


async def test_bad_frames_get_error_frames(make_client: ClientFactory) -> None:
    client = await make_client(max_text_chars=10, max_document_chars=10)
    async with client.ws_connect("/v1/ws") as ws:
        cases: list[tuple[Any, str]] = [
            ("not json", "invalid_json"),
            ("[1, 2]", "invalid_message"),
            ({"op": "dance", "ref": 1}, "unknown_op"),
            ({"op": [], "ref": 1}, "unknown_op"),  # unhashable: once a 500 and a traceback
            ({"op": {"a": 1}}, "unknown_op"),
            ({"op": None}, "unknown_op"),
            ({"op": "submit", "ref": 2}, "missing_field"),
            ({"op": "submit", "ref": 3, "request": {"text": "x" * 11}}, "text_too_long"),
            ({"op": "submit", "ref": 4, "request": {"text": "hi", "voice": "?"}}, "unknown_voice"),
            (
                {"op": "submit", "request": {"text": "hi"}, "idempotency_key": 5},
                "invalid_idempotency_key",
            ),
            ({"op": "subscribe", "job_id": 7}, "invalid_job_id"),
            ({"op": "subscribe", "job_id": "f" * 32}, "job_not_found"),
            ({"op": "subscribe", "job_id": "nope"}, "job_not_found"),
            ({"op": "cancel", "job_id": "0" * 32}, "job_not_found"),
        ]
        for frame, code in cases:
            if isinstance(frame, str):
                await ws.send_str(frame)
            else:
                await ws.send_json(frame)
            reply = await ws.receive_json(timeout=5)
            assert reply["type"] == "error", (frame, reply)
            assert reply["error"]["code"] == code, (frame, reply)
            if isinstance(frame, dict) and "ref" in frame:
                assert reply["ref"] == frame["ref"]
        await ws.send_bytes(b"\x00\x01")
        assert (await ws.receive_json(timeout=5))["error"]["code"] == "binary_not_accepted"
        # The socket still works after all that.
        await ws.send_json({"op": "ping", "ref": "still"})
        assert await ws.receive_json(timeout=5) == {"type": "pong", "ref": "still"}


async def test_origin_check(make_client: ClientFactory) -> None:
    client = await make_client(allowed_origins="https://app.example.com")
    host = f"{client.host}:{client.port}"
    for origin in (None, f"http://{host}", "https://app.example.com"):
        headers = {"Origin": origin} if origin else {}
        async with client.ws_connect("/v1/ws", headers=headers) as ws:
            await ws.send_json({"op": "ping"})
            assert (await ws.receive_json(timeout=5))["type"] == "pong"
    response = await client.get(
        "/v1/ws",
        headers={
            "Origin": "https://evil.example.net",
            "Upgrade": "websocket",
            "Connection": "Upgrade",
            "Sec-WebSocket-Version": "13",
            "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
        },
    )
    assert response.status == 403
    assert (await response.json())["error"]["code"] == "origin_not_allowed"


async def test_socket_follows_a_job_submitted_over_http(
    client: Client, worker: WorkerProcess
) -> None:
    job = await submit(client, text="Submitted over HTTP.", voice="en_female")
    await wait_job(client, job["id"], ("succeeded",))
    async with client.ws_connect("/v1/ws") as ws:
        await ws.send_json({"op": "subscribe", "job_id": job["id"], "after": None})
        frames = await _job_events(ws, job["id"])
        assert frames[0]["event"]["type"] == "queued"
        assert frames[-1]["event"]["type"] == "succeeded"
        await ws.send_json({"op": "unsubscribe", "job_id": job["id"]})
        await ws.send_json({"op": "ping"})
        assert (await ws.receive_json(timeout=5))["type"] == "pong"
