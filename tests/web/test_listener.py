"""The listening socket against real web processes: headers that never end and bodies that stop
short are cut off at their deadlines, one address cannot hold more than its connections (on one
process or across them), the descriptor limit is raised, and accept failures are logged once a
second, not once each."""

from __future__ import annotations

import contextlib
import re
import socket
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson

from core.infra.settings import Settings
from tests.web import webproc
from tests.web.webproc import WebProcess

start_web = webproc.start_web  # a fixture

STALLED_HEAD = b"GET /v1/live HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"


def connect(port: int, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
    return sock


def closed_by_server(sock: socket.socket, within_s: float) -> bytes | None:
    """What the server sent before closing `sock` within `within_s`; None if it stayed open."""
    sock.settimeout(0.2)
    deadline = time.monotonic() + within_s
    received = b""
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        except ConnectionResetError:
            return received
        if not chunk:
            return received
        received += chunk
    return None


def healthz_ms(url: str) -> float:
    started = time.monotonic()
    with urllib.request.urlopen(f"{url}/healthz", timeout=10) as answer:
        assert answer.status == 200
    return (time.monotonic() - started) * 1000


@contextlib.contextmanager
def sockets() -> Iterator[list[socket.socket]]:
    held: list[socket.socket] = []
    try:
        yield held
    finally:
        for sock in held:
            sock.close()


def test_headers_that_never_end_are_cut_off(start_web: Callable[..., WebProcess]) -> None:
    web = start_web(header_timeout_s=1.0)
    with sockets() as held:
        for _ in range(20):
            sock = connect(web.port)
            sock.sendall(STALLED_HEAD)  # and never the blank line
            held.append(sock)
        silent = connect(web.port)  # a connection that never sends a byte
        held.append(silent)
        assert healthz_ms(web.url) < 1000  # served meanwhile
        started = time.monotonic()
        for sock in held:
            assert closed_by_server(sock, 5.0) is not None, "a stalled connection is still open"
        assert time.monotonic() - started < 5.0


def test_a_request_trickled_within_the_deadline_is_served(
    start_web: Callable[..., WebProcess],
) -> None:
    """The deadline is on the headers as a whole, from their first byte: a kept-alive
    connection that waits between requests, then sends a whole one, is served each time."""
    web = start_web(header_timeout_s=1.5)
    with sockets() as held:
        sock = connect(web.port)
        held.append(sock)
        for _ in range(3):
            time.sleep(0.5)
            sock.sendall(b"GET /healthz HTTP/1.1\r\n")
            time.sleep(0.3)
            sock.sendall(b"Host: 127.0.0.1\r\n\r\n")
            sock.settimeout(5)
            head = sock.recv(65536)
            assert head.startswith(b"HTTP/1.1 200"), head


def test_a_multipart_tts_form_that_stops_short_is_answered_and_closed(
    start_web: Callable[..., WebProcess],
) -> None:
    """ChatTTS-ui's /tts reads its form through the one reader: a body promised and never
    finished is given up at the body deadline (here the listener's backstop closes it), and its
    size is bounded by the route's own limit, not the app's."""
    web = start_web()
    with sockets() as held:
        big = connect(web.port)
        big.sendall(
            b"POST /tts HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: multipart/form-data; boundary=zz\r\n"
            b"Content-Length: 1800000\r\n\r\n--zz\r\n"
        )
        held.append(big)
        started = time.monotonic()
        big.settimeout(5)
        answer = big.recv(65536)
        assert time.monotonic() - started < 2, "a form far past /tts's limit was waited for"
        body = orjson.loads(answer.partition(b"\r\n\r\n")[2])
        assert body["code"] == 1 and "limit" in body["msg"], body
        # aiohttp reads what is left of the body for a while (so that the answer is not lost
        # to a reset), then closes the connection.
        assert closed_by_server(big, 15.0) is not None


def test_one_address_holds_at_most_its_connections(start_web: Callable[..., WebProcess]) -> None:
    web = start_web(connections_per_address=5)
    with sockets() as held:
        for _ in range(5):
            held.append(connect(web.port))
        refused = connect(web.port)
        held.append(refused)
        answer = closed_by_server(refused, 5.0)
        assert answer is not None and answer.startswith(b"HTTP/1.1 429"), answer
        assert b"too_many_connections" in answer
        # Another address is not this one's neighbour.
        other = connect(web.port, source="127.0.0.2")
        held.append(other)
        other.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert other.recv(65536).startswith(b"HTTP/1.1 200")
        # A connection given back is a connection to open again.
        held[0].close()
        time.sleep(0.3)
        again = connect(web.port)
        held.append(again)
        again.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert again.recv(65536).startswith(b"HTTP/1.1 200")


def test_the_cap_holds_across_the_web_processes(start_web: Callable[..., WebProcess]) -> None:
    """Two web processes of one queue: an address's connections to the first count at the
    second within a couple of seconds, and stop counting once they close."""
    first, second = (start_web(connections_per_address=16) for _ in range(2))
    with sockets() as held:
        for _ in range(12):
            held.append(connect(first.port, source="127.0.0.7"))
        time.sleep(3.5)  # a census round of each process (one a second), with room
        answers = []
        for _ in range(8):
            sock = connect(second.port, source="127.0.0.7")
            held.append(sock)
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            answers.append(sock.recv(65536)[:12])
        assert answers.count(b"HTTP/1.1 200") == 4, answers  # 12 there, 4 here: 16 in all
        assert answers.count(b"HTTP/1.1 429") == 4, answers
        for sock in held[:12]:
            sock.close()
        time.sleep(3.5)  # the first's next report says they are gone
        again = connect(second.port, source="127.0.0.7")
        held.append(again)
        again.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert again.recv(65536).startswith(b"HTTP/1.1 200")


def test_the_descriptor_limit_is_raised(start_web: Callable[..., WebProcess]) -> None:
    web = start_web()
    limits = Path(f"/proc/{web.pid}/limits").read_text()
    match = re.search(r"^Max open files\s+(\d+)\s+(\d+)", limits, re.M)
    assert match, limits
    soft, hard = int(match[1]), int(match[2])
    assert soft == min(hard, 1 << 16), limits


def test_accept_failures_are_logged_once_a_second(settings: Settings, tmp_path: Path) -> None:
    """A process out of descriptors fails every accept; it says so once a second with a count,
    not a line (and a traceback) per failure, and serves again once descriptors come back."""
    web = WebProcess(settings, tmp_path / "web.log", files_limit=96).wait_ready()
    try:
        with sockets() as held:
            started = time.monotonic()
            for i in range(300):
                with contextlib.suppress(OSError):
                    held.append(connect(web.port, source=f"127.0.1.{i % 200 + 1}"))
            time.sleep(3.0)
            elapsed = time.monotonic() - started
            log = web.log()
            reports = log.count("socket.accept() out of system resource")
            assert 1 <= reports <= elapsed + 2, log
            assert "Traceback" not in log
        time.sleep(1.5)  # the held connections closed: the process serves again
        assert healthz_ms(web.url) < 2000
    finally:
        web.stop()
