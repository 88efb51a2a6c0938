"""`/tts`, ChatTTS-ui's API, replayed as its clients call it: pyVideoTrans' form post to its
lowercased URL (and its reading of `filename` from disk on localhost), a bot's GET with ChatTTS-ui's
fields, `wav=1`, and its errors as `{"code": 1}` with HTTP 200."""

from __future__ import annotations

import asyncio
import io
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson
import pytest
import requests
import soundfile as sf
from aiohttp.test_utils import TestClient
from yarl import URL

from tests.conftest import ClientFactory, WorkerProcess
from web.appkeys import QUEUE
from web.intake import bodies

Client = TestClient[Any, Any]


def _post_as_pyvideotrans(base: str, text: str, role: str) -> Any:
    """pyVideoTrans' ChatTTS channel, as it sends: its URL lowercased, a form, a long timeout."""
    api_url = "http://" + base.strip().rstrip("/").lower().replace("http://", "").replace(
        "/tts", ""
    )
    data = {"text": text.strip(), "voice": role, "prompt": "", "is_split": 1}
    return requests.post(f"{api_url}/tts", data=data, proxies={"http": "", "https": ""}, timeout=60)


async def test_pyvideotrans_form_post_and_its_file_on_disk(
    make_client: ClientFactory, start_worker: Any, tmp_path: Path
) -> None:
    store = f"file://{tmp_path / 'audio'}"
    client = await make_client(audio_store=store)
    start_worker(CHATTTS_AUDIO_STORE=store)
    base = str(client.make_url("/")).upper().replace("HTTP://", "http://")  # lowercased by it
    answer = await asyncio.to_thread(_post_as_pyvideotrans, base, "Hello from a video.", "2222")
    assert answer.status_code == 200
    body = answer.json()
    assert body["code"] == 0 and body["msg"] == "ok", body
    assert body["filename"] == body["audio_files"][0]["filename"]
    assert body["url"] == body["audio_files"][0]["url"] and body["url"].startswith("http://")
    assert body["audio_files"][0]["audio_duration"] > 0.5
    on_disk = Path(body["filename"])  # what it reads when the server is on localhost
    stored = await asyncio.to_thread(on_disk.read_bytes)
    assert on_disk.is_absolute() and stored[:4] == b"RIFF"
    fetched = await asyncio.to_thread(requests.get, body["url"], timeout=10)  # elsewhere
    assert fetched.status_code == 200 and fetched.content == stored
    samples, rate = sf.read(io.BytesIO(fetched.content))
    assert rate == 24_000 and len(samples) / rate > 0.5


async def test_a_bots_get_with_chatttsuis_fields(client: Client, worker: WorkerProcess) -> None:
    query = {
        "text": "你好，欢迎。",
        "voice": "1031",
        "temperature": "0.3",
        "top_p": "0.7",
        "top_k": "20",
        "skip_refine": "1",
        "speed": "7",
        "text_seed": "42",
        "refine_max_new_token": "384",
        "infer_max_new_token": "2048",
    }
    first = await (await client.get("/tts", params=query)).json()
    assert first["code"] == 0, first
    assert first["filename"].endswith(".wav")  # the audio lives in Redis here: a name, no path
    again = await (await client.get("/tts", params=query)).json()
    assert again["code"] == 0  # seeded with text_seed as ChatTTS-ui seeds: the same audio
    one = await client.get(URL(first["url"]).path)
    two = await client.get(URL(again["url"]).path)
    assert await one.read() == await two.read()


async def test_wav_1_answers_the_wav_itself(client: Client, worker: WorkerProcess) -> None:
    response = await client.post("/tts", data={"text": "Hello.", "wav": "1", "voice": "en_male"})
    assert response.status == 200 and response.headers["Content-Type"] == "audio/x-wav"
    samples, rate = sf.read(io.BytesIO(await response.read()))
    assert rate == 24_000 and samples.size


async def test_errors_are_code_1_with_http_200(client: Client, worker: WorkerProcess) -> None:
    cases = [
        ({"voice": "2222"}, "text params lost"),
        ({"text": "Hello.", "temperature": "hot"}, "'temperature' must be a number"),
        ({"text": "Hello.", "voice": "en_female+en_male"}, "cannot mix voices"),
    ]
    for form, message in cases:
        response = await client.post("/tts", data=form)
        assert response.status == 200
        body = await response.json()
        assert body["code"] == 1 and message in body["msg"], (form, body)


async def test_a_voice_that_is_no_name_here_speaks_in_the_default_seed(
    client: Client, worker: WorkerProcess
) -> None:
    """As ChatTTS-ui does: pyVideoTrans' settings test sends `voice=boy1`."""
    for voice, spoken in (("boy1", "seed_2222"), ("1234", "seed_1234"), ("en_female", "en_female")):
        response = await client.post("/tts", data={"text": "Hello.", "voice": voice})
        answer = await response.json()
        assert answer["code"] == 0, (voice, answer)
        job = await client.app[QUEUE].get(response.headers["X-Job-Id"])
        assert job is not None and job.request.voice == spoken, (voice, job)


async def test_a_page_elsewhere_cannot_speak_through_a_get(client: Client) -> None:
    """`<img src="http://127.0.0.1:8000/tts?text=…">` on another site: no job made."""
    headers = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}
    body = await (await client.get("/tts", params={"text": "Hi."}, headers=headers)).json()
    assert body["code"] == 1 and "another site" in body["msg"]
    listed = await (await client.get("/v1/tts/jobs")).json()
    assert listed["jobs"] == []


async def test_a_form_is_bounded_by_what_a_call_can_carry(client: Client) -> None:
    """A form goes through the one body reader with /tts's own bound (a few KB above the text
    limit), its fields counted before they are parsed: a flood of empty fields costs nothing."""
    flood = b"&" * (2 * 1024 * 1024)
    started = time.monotonic()
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    response = await client.post("/tts", data=flood, headers=headers)
    body = await response.json()
    assert body["code"] == 1 and "limit" in body["msg"], body
    many = b"&".join(b"f%d=" % i for i in range(5_000))  # within the size bound
    response = await client.post("/tts", data=many, headers=headers)
    body = await response.json()
    assert body["code"] == 1 and "fields" in body["msg"], body
    assert time.monotonic() - started < 2.0
    listed = await (await client.get("/v1/tts/jobs")).json()
    assert listed["jobs"] == []


async def test_a_form_that_stops_arriving_is_given_up(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A multipart form promised and never finished meets the body deadline, as every body
    does (no reader of its own without one)."""
    monkeypatch.setattr(bodies, "BODY_TIMEOUT_S", 1.0)
    reader, writer = await asyncio.open_connection(client.host, client.port)
    writer.write(
        b"POST /tts HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: multipart/form-data; boundary=zz\r\n"
        b"Content-Length: 4000\r\n\r\n"
        b'--zz\r\nContent-Disposition: form-data; name="text"\r\n\r\nHello'
    )
    await writer.drain()
    async with asyncio.timeout(10):
        answer = await reader.read(65536)
    assert answer.startswith(b"HTTP/1.1 200"), answer
    body = orjson.loads(answer.partition(b"\r\n\r\n")[2])
    assert body["code"] == 1 and "did not arrive" in body["msg"], body
    writer.close()


async def test_a_remote_caller_is_told_the_files_name_not_its_path(
    make_client: ClientFactory, start_worker: Any, tmp_path: Path
) -> None:
    """The path on disk is for a caller on this machine (pyVideoTrans on localhost); one
    elsewhere (here through a trusted proxy) gets the name only. Its job is not high priority:
    that is for API keys."""
    store = f"file://{tmp_path / 'audio'}"
    client = await make_client(audio_store=store, trusted_proxies="127.0.0.0/8")
    start_worker(CHATTTS_AUDIO_STORE=store)
    headers = {"X-Forwarded-For": "203.0.113.9"}
    response = await client.post("/tts", data={"text": "Hello.", "voice": "2222"}, headers=headers)
    body = await response.json()
    assert body["code"] == 0, body
    assert "/" not in body["filename"] and body["filename"].endswith(".wav"), body
    job = await client.app[QUEUE].get(response.headers["X-Job-Id"])
    assert job is not None and job.request.priority == "normal", job


async def test_a_form_part_in_an_unknown_charset_is_read_as_utf8(
    client: Client, worker: WorkerProcess
) -> None:
    body = (
        b'--zz\r\nContent-Disposition: form-data; name="voice"\r\n'
        b"Content-Type: text/plain; charset=no-such-charset\r\n\r\nen_male\r\n"
        b'--zz\r\nContent-Disposition: form-data; name="text"\r\n\r\nHi.\r\n--zz--\r\n'
    )
    headers = {"Content-Type": "multipart/form-data; boundary=zz"}
    response = await client.post("/tts", data=body, headers=headers)
    answer = await response.json()
    assert response.status == 200 and answer["code"] == 0, answer
    job = await client.app[QUEUE].get(response.headers["X-Job-Id"])
    assert job is not None and job.request.voice == "en_male", job


async def test_a_form_in_its_declared_charset(client: Client, worker: WorkerProcess) -> None:
    """ChatTTS-ui's callers are often programs on Chinese Windows: a GBK form that says so is
    read in GBK, raw or percent-encoded; one that does not say so is refused, never garbled."""
    text = "你好，世界。"
    for body in (
        b"text=" + text.encode("gbk"),
        f"text={quote(text.encode('gbk'))}".encode(),
    ):
        form = {"Content-Type": "application/x-www-form-urlencoded; charset=gbk"}
        response = await client.post("/tts", data=body, headers=form)
        answer = await response.json()
        assert answer["code"] == 0, answer
        job = await client.app[QUEUE].get(response.headers["X-Job-Id"])
        assert job is not None and job.request.text == text, job
    unsaid = {"Content-Type": "application/x-www-form-urlencoded"}
    body = b"text=" + text.encode("gbk")
    answer = await (await client.post("/tts", data=body, headers=unsaid)).json()
    assert answer["code"] == 1 and "is not utf-8 text" in answer["msg"], answer
