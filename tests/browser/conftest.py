"""Browser tests: Debian's Chromium (no browser download) against a real web process and real
worker processes on a real Redis.

The tests use Playwright's sync API in plain `def` tests (pytest runs them outside any event loop).
Screenshots go to $CHATTTS_ARTIFACTS, else tests/artifacts/.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from core.infra.settings import Settings
from tests.browser.engines import ENGINES, ChromiumDriver, Driver, FirefoxDriver, WebKitDriver
from tests.browser.host import missing, virtual_display, virtual_sound_card
from tests.web.webproc import WebProcess

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("CHATTTS_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--autoplay-policy=no-user-gesture-required",
]
ARTIFACTS = Path(os.environ.get("CHATTTS_ARTIFACTS") or ROOT / "tests" / "artifacts")


# ------------------------------------------------------------------------------------ servers


@pytest.fixture
def start_web(settings: Settings, tmp_path: Path) -> Iterator[Callable[..., WebProcess]]:
    started: list[WebProcess] = []

    def start(settings_: Settings | None = None) -> WebProcess:
        web = WebProcess(settings_ or settings, tmp_path / f"web{len(started) + 1}.log")
        started.append(web)
        return web.wait_ready()

    yield start
    for web in started:
        web.stop()


@pytest.fixture
def web(start_web: Callable[..., WebProcess]) -> WebProcess:
    return start_web()


class TcpProxy:
    """A TCP relay between the browser and the web process that a test can cut, to kill the
    live event connection the way a network failure does. It records each request head, so a
    test can see the resume cursor the browser sent. With `rate` (bytes per second), what the
    server sends trickles, as over a slow network."""

    def __init__(self, target_port: int) -> None:
        self.target = ("127.0.0.1", target_port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.refusing = False
        self.rate: float | None = None
        self.heads: list[str] = []
        self._pairs: set[tuple[socket.socket, socket.socket]] = set()
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.refusing:
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            pair = (client, upstream)
            with self._lock:
                self._pairs.add(pair)
            threading.Thread(target=self._relay, args=(pair,), daemon=True).start()

    def _relay(self, pair: tuple[socket.socket, socket.socket]) -> None:
        client, upstream = pair
        peers = {client: upstream, upstream: client}
        try:
            while True:
                readable, _, _ = select.select([client, upstream], [], [], 0.5)
                if self._closed or pair not in self._pairs:
                    break
                for sock in readable:
                    data = sock.recv(16384 if self.rate else 65536)
                    if not data:
                        return
                    if sock is client and data[:4] in (b"GET ", b"POST", b"DELE", b"HEAD"):
                        self.heads.append(data.split(b"\r\n\r\n", 1)[0].decode("latin-1"))
                    peers[sock].sendall(data)
                    if sock is upstream and self.rate:
                        time.sleep(len(data) / self.rate)
        except OSError:
            pass
        finally:
            with self._lock:
                self._pairs.discard(pair)
            for sock in pair:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def cut(self) -> None:
        """Reset every open connection (the event stream included)."""
        with self._lock:
            pairs = list(self._pairs)
            self._pairs.clear()
        for pair in pairs:
            for sock in pair:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._closed = True
        self.cut()
        self.listener.close()


@pytest.fixture
def make_proxy() -> Iterator[Callable[[int], TcpProxy]]:
    proxies: list[TcpProxy] = []

    def make(port: int) -> TcpProxy:
        proxy = TcpProxy(port)
        proxies.append(proxy)
        return proxy

    yield make
    for proxy in proxies:
        proxy.close()


# ------------------------------------------------------------------------------------ browser


# Module scope: sync Playwright runs an event loop of its own in this thread, which must be gone
# before the asyncio tests of other modules start theirs.
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists() and not shutil.which(CHROMIUM):
        if os.environ.get("CHATTTS_REQUIRE_BROWSER") == "1":
            pytest.fail(f"no Chromium at {CHROMIUM}, and CHATTTS_REQUIRE_BROWSER=1")
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium, or CHATTTS_CHROMIUM)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


class Console:
    """Console errors and uncaught page errors, collected for the no-error assertions."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def attach(self, page: Any) -> None:
        page.on("console", lambda m: m.type == "error" and self.errors.append(f"console: {m.text}"))
        page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))


@pytest.fixture
def console() -> Console:
    return Console()


@pytest.fixture
def new_page(browser: Any, console: Console) -> Iterator[Callable[..., Any]]:
    """Pages in fresh browser contexts (own cookies and localStorage) unless one is passed."""
    contexts: list[Any] = []

    def make(context: Any = None, **options: Any) -> Any:
        if context is None:
            options.setdefault("viewport", {"width": 1280, "height": 900})
            options.setdefault("accept_downloads", True)
            context = browser.new_context(**options)
            context.set_default_timeout(20_000)
            contexts.append(context)
        page = context.new_page()
        console.attach(page)
        return page

    yield make
    for context in contexts:
        context.close()


@pytest.fixture
def shot() -> Callable[[Any, str], Path]:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    def save(page: Any, name: str, full_page: bool = True) -> Path:
        path = ARTIFACTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=full_page)
        return path

    return save


# ------------------------------------------------------------------- one page, three engines


@pytest.fixture(scope="module", params=ENGINES)
def driver(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Driver]:
    """One browser per engine for the module's scenarios (sync Playwright's own event loop is
    gone before the asyncio tests of other modules start theirs)."""
    engine: str = request.param
    lack = missing(engine)
    if lack:
        if os.environ.get("CHATTTS_REQUIRE_BROWSER") == "1":
            pytest.fail(f"{lack}, and CHATTTS_REQUIRE_BROWSER=1")
        pytest.skip(lack)
    if engine == "chromium":
        from playwright.sync_api import sync_playwright

        # Desktop Chrome's autoplay policy (a user gesture first), which headless mode relaxes.
        policy = "--autoplay-policy=document-user-activation-required"
        with sync_playwright() as playwright:
            chromium = ChromiumDriver(
                playwright, ["--no-sandbox", "--disable-gpu", "--no-first-run", policy]
            )
            yield chromium
            chromium.close()
        return
    with virtual_sound_card(tmp_path_factory.mktemp("pulse")) as sound:
        if engine == "firefox":
            firefox = FirefoxDriver(sound, tmp_path_factory.mktemp("gecko") / "gecko.log")
            yield firefox
            firefox.close()
            return
        with virtual_display() as display:
            webkit = WebKitDriver({**sound, **display})
            yield webkit
            webkit.close()
