"""A real web process's log for requests it cannot parse: one short line each, no traceback,
none of the client's bytes."""

from __future__ import annotations

import socket
import time
from typing import Any

from tests.web import webproc
from tests.web.webproc import WebProcess

start_web = webproc.start_web  # a fixture

GARBAGE = (
    b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
    b"GET /\x00secret-looking-bytes HTTP/1.1\r\n\r\n",
    b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03 a TLS hello on a plain port\r\n\r\n",
)
ROUNDS = 20


def send(port: int, payload: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(payload)
        return sock.recv(200)


def test_malformed_requests_are_a_line_each(start_web: Any) -> None:
    web: WebProcess = start_web()
    before = len(web.log_path.read_text(errors="replace"))
    for _ in range(ROUNDS):
        for payload in GARBAGE:
            assert send(web.port, payload).startswith(b"HTTP/1.0 400"), payload
    time.sleep(0.3)
    written = web.log_path.read_text(errors="replace")[before:]
    assert "Traceback" not in written and "secret-looking" not in written, written[-2000:]
    assert written.count("malformed request: 400") >= 2 * ROUNDS, written[-2000:]
    # One line of the server's and one access line each: about 300 bytes, not kilobytes.
    assert len(written) < ROUNDS * len(GARBAGE) * 400, len(written)
    assert web.get("/healthz")


def test_credentials_in_a_query_string_are_masked(start_web: Any) -> None:
    """A key sent as a query parameter is refused (keys go in headers) and never written to
    the log; the rest of the query is kept as sent."""
    web: WebProcess = start_web(api_keys="the-only-key")
    before = len(web.log_path.read_text(errors="replace"))
    for query in (
        "api_key=hunter2-secret&lang=en",
        "xi_api_key=hunter2-secret",
        "token=hunter2-secret",
    ):
        request = f"GET /v1/voices?{query} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        answer = send(web.port, request.encode())
        assert answer.startswith(b"HTTP/1.1 401"), answer
    time.sleep(0.3)
    written = web.log_path.read_text(errors="replace")[before:]
    assert "hunter2" not in written, written[-2000:]
    assert "GET /v1/voices?api_key=***&lang=en HTTP/1.1" in written, written[-2000:]
