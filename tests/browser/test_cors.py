"""A page of another origin calls the API in Blink, Gecko and WebKit: its preflight, its answers
and its errors, only where CHATTTS_ALLOWED_ORIGINS allows it (a real web process and Redis)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from core.infra.settings import Settings
from tests.browser.engines import WEBKIT_CRASH, Driver, WebKitDriver
from tests.web.webproc import WebProcess

pytestmark = [pytest.mark.browser, pytest.mark.flaky(reruns=1, only_rerun=[WEBKIT_CRASH])]

PAGE = b"<!doctype html><html><head><title>Another site</title></head><body>A page.</body></html>"
# What the page's script does: a JSON submit (a preflight first: its Content-Type and
# Idempotency-Key are not what a form sends), the job read back, the page's own list, an error.
# A request the browser refuses rejects with a TypeError, which comes back as `refused`.
CALL_THE_API = """
const [api, credentials, sendToken] = args;
const out = {};
try {
  const submitted = await fetch(api + "/v1/tts/jobs", {
    method: "POST",
    credentials,
    headers: {
      "Content-Type": "application/json",
      "Idempotency-Key": "page-" + Math.random().toString(36).slice(2),
    },
    body: JSON.stringify({ text: "From a page on another site.", voice: "en_female" }),
  });
  out.status = submitted.status;
  out.location = submitted.headers.get("Location");
  out.token = submitted.headers.get("X-Client-Token");
  const job = await submitted.json();
  out.id = job.id;
  // The identity the answer gave: sent back as a header, or left to the cookie.
  const mine = sendToken ? { "X-Client-Token": out.token } : {};
  const read = await fetch(api + "/v1/tts/jobs/" + job.id, { credentials, headers: mine });
  out.state = (await read.json()).state;
  const listed = await fetch(api + "/v1/tts/jobs", { credentials, headers: mine });
  out.mine = (await listed.json()).jobs.map((j) => j.id);
  const bad = await fetch(api + "/v1/tts/jobs", {
    method: "POST",
    credentials,
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ text: "" }),
  });
  out.errorStatus = bad.status;
  out.errorCode = (await bad.json()).error.code;
} catch (error) {
  out.refused = error.name;
}
return out;
"""
# A GET a page may send without a preflight: sent, but its answer is not the page's to read.
READ_VOICES = """
try {
  const answer = await fetch(args[0] + "/v1/voices", { credentials: args[1] });
  return { status: answer.status };
} catch (error) {
  return { refused: error.name };
}
"""

# A job's event stream, followed with the cookie: what the page hears first.
FOLLOW_EVENTS = """
return await new Promise((resolve) => {
  const source = new EventSource(args[0], { withCredentials: true });
  const end = (what) => { source.close(); resolve(what); };
  source.addEventListener("queued", () => end("queued"));
  source.onerror = () => end("error");
  setTimeout(() => end("nothing"), 15000);
});
"""


class PageServer:
    """Another site: a tiny page on a port of its own (127.0.0.1:A and 127.0.0.1:B are two
    origins), served without the service's Content-Security-Policy."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(PAGE)))
                self.end_headers()
                self.wfile.write(PAGE)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def page_servers() -> Iterator[Callable[[], PageServer]]:
    started: list[PageServer] = []

    def start() -> PageServer:
        started.append(PageServer())
        return started[-1]

    yield start
    for server in started:
        server.close()


@pytest.fixture(autouse=True)
def live_driver(driver: Driver) -> None:
    """Each scenario starts in a live session (a new one after a WebKit crash)."""
    if isinstance(driver, WebKitDriver):
        driver.revive()


def test_a_listed_origin_uses_the_api_with_its_cookie(
    driver: Driver,
    settings: Settings,
    start_web: Callable[..., WebProcess],
    page_servers: Callable[[], PageServer],
) -> None:
    listed, other = page_servers(), page_servers()
    web = start_web(settings.replace(allowed_origins=listed.origin))

    driver.goto(f"{listed.origin}/")
    out = driver.run(CALL_THE_API, web.url, "include", False)
    assert "refused" not in out, (driver.engine, out)
    assert out["status"] == 202 and out["state"] == "queued", out
    assert out["location"] and out["location"].endswith(out["id"]), out
    # Its pages are the same site as the service here (the port is no part of a site): the
    # identity cookie of the first answer came back with the next requests.
    assert out["mine"] == [out["id"]], out
    assert out["errorStatus"] == 422 and out["errorCode"], out
    events_url = f"{web.url}/v1/tts/jobs/{out['id']}/events"
    assert driver.run(FOLLOW_EVENTS, events_url) == "queued"

    driver.goto(f"{other.origin}/")
    out = driver.run(CALL_THE_API, web.url, "include", False)
    assert out == {"refused": "TypeError"}, (driver.engine, out)
    assert driver.run(FOLLOW_EVENTS, events_url) == "error"
    out = driver.run(READ_VOICES, web.url, "omit")
    assert out == {"refused": "TypeError"}, (driver.engine, out)


def test_any_origin_uses_the_api_without_credentials(
    driver: Driver,
    settings: Settings,
    start_web: Callable[..., WebProcess],
    page_servers: Callable[[], PageServer],
) -> None:
    page = page_servers()
    web = start_web(settings.replace(allowed_origins="*"))
    driver.goto(f"{page.origin}/")
    out = driver.run(CALL_THE_API, web.url, "omit", True)
    assert "refused" not in out, (driver.engine, out)
    assert out["status"] == 202 and out["state"] == "queued", out
    # No cookie: the page is the client its `X-Client-Token` says.
    assert out["token"], out
    assert out["mine"] == [out["id"]], out
    assert out["errorStatus"] == 422, out
    out = driver.run(CALL_THE_API, web.url, "include", False)
    assert out == {"refused": "TypeError"}, (driver.engine, out)
    out = driver.run(READ_VOICES, web.url, "omit")
    assert out == {"status": 200}, (driver.engine, out)
