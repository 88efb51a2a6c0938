"""Fuzz the HTTP API of a real web process with a real worker behind it.

Random JSON bodies (unicode edge cases: controls, format characters, RTL, emoji, lone surrogates
as JSON escapes and as raw invalid UTF-8, NUL), truncated, huge and binary bodies, wrong content
types and encodings, junk headers and ids, every method on every route: never a 5xx, every error
in the project's JSON shape, and every accepted job reaches a terminal state.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import time
import urllib.parse
from collections.abc import Mapping
from typing import Any

import orjson
import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.queue.job import TERMINAL_STATES
from core.queue.keys import Keys
from tests.conftest import WorkerProcess
from tests.web import webproc
from tests.web.fuzzdata import (
    MAX_BODY,
    ODD_CURSORS,
    PROBES,
    RANGES,
    bodies,
    encode,
    encodings,
    headers_st,
    junk,
    texts,
)
from tests.web.webproc import WebProcess

start_web = webproc.start_web  # a fixture

MAX_CHARS = 300
FUZZ = settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
SUBMIT_PATHS = ("/v1/tts/jobs", "/tts/submit", "/v1/audio/speech")
TERMINAL = {state.value.encode() for state in TERMINAL_STATES}
JSON = {"Content-Type": "application/json"}


def _header_bytes(value: str) -> bytes:
    """Latin-1 where it fits (raw bytes 0x80-0xff, often invalid UTF-8), else UTF-8."""
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError:
        return value.encode()


class Http:
    """Raw HTTP/1.1 requests to one server; a fresh connection each time (the server may close)."""

    def __init__(self, web: WebProcess) -> None:
        self.port = web.port

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: Mapping[str, str | None] | None = None,
    ) -> tuple[int, http.client.HTTPMessage, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=15)
        try:
            conn.putrequest(method, path, skip_accept_encoding=True)
            for name, value in (headers or {}).items():
                if value is not None:
                    conn.putheader(name, _header_bytes(value))
            if body is not None:
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders()
            if body:
                # Refused early (413)? The answer is already there to read.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    conn.send(body)
            response = conn.getresponse()
            if response.getheader("Content-Type", "").startswith("text/event-stream"):
                return response.status, response.headers, b""  # a live stream: headers suffice
            return response.status, response.headers, response.read()
        finally:
            conn.close()


def check_answer(
    path: str, method: str, status: int, headers: http.client.HTTPMessage, data: bytes
) -> Any:
    """Never a 5xx; an error is JSON in the project's shape (FastAPI's under /tts/)."""
    assert status < 500, (method, path, status, data[:500])
    if status < 400 or method == "HEAD":
        return None
    assert headers.get("Content-Type", "").startswith("application/json"), (path, status, data)
    body = orjson.loads(data)
    if path.startswith("/tts/"):
        assert "detail" in body, body
    else:
        error = body["error"]
        assert isinstance(error["message"], str) and error["message"], body
        assert isinstance(error["type"], str) and isinstance(error["code"], str), body
        assert error["param"] is None or isinstance(error["param"], str), body
    return body


def assert_no_stuck_job(redis_url: str, keys: Keys, timeout: float = 60.0) -> int:
    """Every job of the queue reaches a terminal state and leaves the stream; returns the count."""
    client = redis.Redis.from_url(redis_url)
    deadline = time.monotonic() + timeout
    try:
        while True:
            jobs = list(client.scan_iter(match=keys.job("*"), count=1000))
            states = [client.hget(key, "state") for key in jobs]
            pending = [(k, s) for k, s in zip(jobs, states, strict=True) if s not in TERMINAL]
            active = [k for k in client.scan_iter(match=keys.active("*")) if client.scard(k)]
            waiting = int(client.hget(keys.fair, "queued") or 0)
            if not pending and not active and client.xlen(keys.jobs) == 0 and not waiting:
                return len(jobs)
            assert time.monotonic() < deadline, f"stuck: {pending[:5]}, active sets {active[:5]}"
            time.sleep(0.2)
    finally:
        client.close()


def assert_clean(web: WebProcess) -> None:
    assert web.server_errors() == 0, web.log()
    assert "ERROR chattts_online" not in web.log_path.read_text(errors="replace"), web.log()


@pytest.fixture
def web(start_web: Any, worker: WorkerProcess) -> WebProcess:
    # Documents (up to the body's size here) have their own tests: this one fuzzes validation.
    process: WebProcess = start_web(
        max_body_bytes=MAX_BODY, max_text_chars=MAX_CHARS, max_document_chars=MAX_CHARS
    )
    return process


def _routed(http: Http, path: str) -> bool:
    status, _, data = http.request("POST", path, b"{}", JSON)
    return status != 404 or b"unknown_endpoint" not in data


def test_fuzz_submissions(web: WebProcess, keys: Keys) -> None:
    http = Http(web)
    paths = [p for p in SUBMIT_PATHS if _routed(http, p)]
    accepted: list[str] = []

    @FUZZ
    @given(
        path=st.sampled_from(paths),
        body=bodies,
        how=encodings,
        cut=st.integers(0, 10**6),
        noise=st.binary(max_size=16),
        headers=headers_st,
    )
    def submit(
        path: str, body: Any, how: str, cut: int, noise: bytes, headers: dict[str, str | None]
    ) -> None:
        data = encode(body, how, cut, noise)
        status, response_headers, answer = http.request("POST", path, data, headers)
        check_answer(path, "POST", status, response_headers, answer)
        if status < 300:
            accepted.append(path)
        if status == 429:
            assert int(response_headers["Retry-After"]) >= 1

    submit()
    assert len(accepted) >= 5, f"only {len(accepted)} submissions accepted: fuzz the queue too"
    assert_no_stuck_job(web.settings.redis.redis_url or "", keys)
    assert_clean(web)


def test_fuzz_ids_cursors_and_headers(web: WebProcess, keys: Keys) -> None:
    http = Http(web)
    ids = []
    for text in ("One.", "Two.", "Three."):
        body = json.dumps({"text": text}).encode()
        status, _, data = http.request("POST", "/v1/tts/jobs", body, JSON)
        assert status == 202, data
        ids.append(orjson.loads(data)["id"])
    assert_no_stuck_job(web.settings.redis.redis_url or "", keys)
    job_ids = st.one_of(
        st.sampled_from(ids),
        st.text("0123456789abcdef", min_size=30, max_size=34),
        texts.map(lambda s: urllib.parse.quote(s.encode("utf-8", "surrogatepass"), safe="")),
    )
    cursors = st.one_of(
        junk,
        st.sampled_from(ODD_CURSORS),
        st.builds(lambda a, b: f"{a}-{b}", st.integers(0, 2**65), st.integers(0, 2**65)),
    )

    @FUZZ
    @given(
        template=st.sampled_from(PROBES),
        job_id=job_ids,
        n=st.one_of(st.integers(0, 10**6).map(str), st.sampled_from(["%D9%A3", "1x", "-1"])),
        query=st.dictionaries(
            st.sampled_from(["last_event_id", "download", "x"]), cursors, max_size=2
        ),
        headers=st.fixed_dictionaries(
            {},
            optional={
                "Last-Event-ID": cursors,
                "Range": st.one_of(junk, st.sampled_from(RANGES)),
                "If-None-Match": st.one_of(junk, st.sampled_from(['"x"', "*", "W/junk"])),
                "If-Range": junk,
                "If-Modified-Since": junk,
                "Cookie": junk,
                "Authorization": junk,
            },
        ),
    )
    def probe(
        template: tuple[str, str],
        job_id: str,
        n: str,
        query: dict[str, str],
        headers: dict[str, str | None],
    ) -> None:
        method, pattern = template
        path = pattern.format(id=job_id, n=n)
        if query:
            path += "?" + urllib.parse.urlencode(query)
        status, response_headers, data = http.request(method, path, None, headers)
        check_answer(path, method, status, response_headers, data)

    probe()
    assert_no_stuck_job(web.settings.redis.redis_url or "", keys)
    assert_clean(web)


METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "PURGE")
ROUTES = """/ /v1/tts/jobs /v1/tts/jobs/{id} /v1/tts/jobs/{id}/audio /v1/tts/jobs/{id}/segments/1
/v1/tts/jobs/{id}/events /v1/events /v1/ws /v1/voices /v1/audio/speech /tts/submit
/tts/query/{id} /healthz /readyz /metrics /static/app.js /static/nothing /nowhere /v1"""


def test_every_method_on_every_route(web: WebProcess, keys: Keys) -> None:
    http = Http(web)
    paths = ROUTES.format(id="0" * 32).split()
    for path in paths:
        for method in METHODS:
            body = b"{}" if method in ("POST", "PUT", "PATCH") else None
            status, headers, data = http.request(method, path, body, JSON)
            check_answer(path, method, status, headers, data)
            if status == 405:
                assert headers["Allow"], (method, path)
    assert_no_stuck_job(web.settings.redis.redis_url or "", keys)
    assert_clean(web)


def _raw(port: int, data: bytes, hang_up: bool) -> bytes:
    """Send raw bytes; with `hang_up`, close at once (a client that dies mid-body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(data)
        if hang_up:
            return b""
        sock.settimeout(2)
        out = b""
        try:
            while chunk := sock.recv(65536):
                out += chunk
                if b"\r\n\r\n" in out:
                    head, _, rest = out.partition(b"\r\n\r\n")
                    length = [h for h in head.split(b"\r\n") if h.lower().startswith(b"content-l")]
                    if length and len(rest) >= int(length[0].split(b":")[1]):
                        break
        except TimeoutError:
            pass
        return out


def test_protocol_errors(web: WebProcess) -> None:
    """Bodies broken below JSON: truncated, badly chunked, undecodable. 400 or nothing, no 5xx."""
    json_head = b"Host: 127.0.0.1\r\nContent-Type: application/json\r\n"
    for path in (b"/v1/tts/jobs", b"/tts/submit"):
        start = b"POST " + path + b" HTTP/1.1\r\n" + json_head
        # A client that dies mid-body, by Content-Length and by chunks: no answer to give.
        _raw(web.port, start + b'Content-Length: 100\r\n\r\n{"text":', hang_up=True)
        _raw(web.port, start + b'Transfer-Encoding: chunked\r\n\r\n9\r\n{"text":', hang_up=True)
        # Compressed bodies are refused before anything decodes them (a truncated deflate
        # stream used to hang the request); unknown expectations are 417s in our shape.
        answers = [
            (b"415", b"Content-Encoding: gzip\r\nContent-Length: 4\r\n\r\njunk"),
            (b"415", b"Content-Encoding: deflate\r\nContent-Length: 1\r\n\r\n{"),
            (b"415", b"Content-Encoding: br\r\nContent-Length: 2\r\n\r\n{}"),
            (b"417", b"Expect: \x80junk\r\nContent-Length: 2\r\n\r\n{}"),
        ]
        for status, rest in answers:
            head, _, data = _raw(web.port, start + rest, False).partition(b"\r\n\r\n")
            assert head.split(b" ")[1] == status, head
            assert b"application/json" in head, head
            body = orjson.loads(data)
            assert ("detail" in body) if path == b"/tts/submit" else ("error" in body), body
        # Below HTTP itself (bad chunk sizes, no HTTP at all) aiohttp's parser answers a plain
        # 400 and closes before any application code runs.
        for broken in (
            start + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 not http\r\n\r\n",
        ):
            assert _raw(web.port, broken, hang_up=False).split(b" ")[1] == b"400"
    deadline = time.monotonic() + 5
    while web.server_errors() or "499" not in web.get("/metrics"):
        assert time.monotonic() < deadline, web.get("/metrics")  # hang-ups count as 499
        time.sleep(0.05)
    assert web.get("/healthz") == '{"status":"ok"}'
    assert "ERROR chattts_online" not in web.log(), web.log()
