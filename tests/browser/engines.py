"""The three browser engines behind one small driver, so that one scenario runs in each: Blink
(Debian's Chromium, through Playwright), Gecko (Debian's Firefox ESR, through Marionette) and
WebKit (WebKitGTK's MiniBrowser, Safari's engine, through WebKitWebDriver on a virtual display).

No browser is downloaded: each is the distribution's own build. Firefox and WebKit play audio on
a virtual sound card (a PulseAudio null sink, started by the tests): headless Firefox keeps an
AudioContext suspended when it has no output device at all.

Console errors: Chromium reports them through Playwright (from before the first script runs).
Marionette and WebKitWebDriver have no console log and no script that runs before the page's
own, so there the driver installs the same collector (`window.onerror`, unhandled rejections,
CSP violations, `console.error`) right after each load; an error thrown while the page's modules
first run is caught by the scenarios' first check instead, the connection pill turning "live",
which only a page whose every module ran can do.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any, Protocol

CHROMIUM = os.environ.get("CHATTTS_CHROMIUM", "/usr/bin/chromium")
FIREFOX = os.environ.get("CHATTTS_FIREFOX", "/usr/bin/firefox-esr")
WEBKIT_DRIVER = os.environ.get("CHATTTS_WEBKIT_DRIVER", "/usr/bin/WebKitWebDriver")
MINIBROWSER = os.environ.get(
    "CHATTTS_MINIBROWSER", "/usr/lib/x86_64-linux-gnu/webkit2gtk-4.1/MiniBrowser"
)
ENGINES = ("chromium", "firefox", "webkit")
# What WebKitWebDriver answers when MiniBrowser's web process crashed or stopped answering: the
# browser's failure, not the page's; such a scenario gets one more try in a new session.
WEBKIT_CRASH = "session deleted because of page crash or hang"
WIDTH, HEIGHT = 1280, 900
SCRIPT_TIMEOUT_S = 60
# Typing a long text key by key costs seconds in WebDriver engines; the typing path is exercised
# by the short texts, and longer ones are set as a paste would (value, then an `input` event).
TYPE_KEYS_UP_TO = 200

# Installed in the page (before its scripts in Chromium, after load elsewhere): what went wrong.
COLLECTOR = """
if (!window.__pageErrors) {
  const errors = [];
  window.__pageErrors = errors;
  window.addEventListener("error", (e) => {
    const target = e.target && e.target !== window ? e.target : null;
    errors.push(target ? `resource: <${target.tagName}> ${target.src || target.href || ""}`
                       : `error: ${e.message} (${e.filename}:${e.lineno})`);
  }, true);
  window.addEventListener("unhandledrejection", (e) => errors.push(`rejection: ${e.reason}`));
  document.addEventListener("securitypolicyviolation",
    (e) => errors.push(`csp: ${e.violatedDirective} ${e.blockedURI}`));
  const original = console.error.bind(console);
  console.error = (...args) => { errors.push(`console: ${args.join(" ")}`); original(...args); };
}
"""

# Every engine runs the script as the body of an async function with `args`; WebDriver's
# asynchronous execution hands back the resolved value (errors as {"__error": message}).
ASYNC_WRAPPER = """
const done = arguments[arguments.length - 1];
const args = Array.prototype.slice.call(arguments, 0, arguments.length - 1);
(async () => { %s })().then(
  (value) => done(value === undefined ? null : value),
  (error) => done({ __error: String(error && error.stack || error) }),
);
"""


class ScriptError(AssertionError):
    """A script run in the page threw."""


class Driver(Protocol):
    """What a scenario does to a page, the same in every engine."""

    engine: str

    def goto(self, url: str) -> None: ...
    def reload(self) -> None: ...
    def run(self, body: str, *args: Any) -> Any: ...
    def run_without_gesture(self, expression: str) -> None: ...
    def click(self, css: str) -> None: ...
    def type(self, css: str, text: str) -> None: ...
    def screenshot(self, path: Path) -> None: ...
    def errors(self) -> list[str]: ...
    def close(self) -> None: ...


def _checked(result: Any) -> Any:
    if isinstance(result, dict) and "__error" in result:
        raise ScriptError(result["__error"])
    return result


def _set_value_js() -> str:
    return """
    const el = document.querySelector(args[0]);
    el.focus();
    el.value = args[1];
    el.dispatchEvent(new Event("input", { bubbles: true }));
    """


# ------------------------------------------------------------------------------------ Chromium


class ChromiumDriver:
    engine = "chromium"

    def __init__(self, playwright: Any, args: list[str]) -> None:
        self.browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=args, headless=True
        )
        self.context: Any = None
        self.console: list[str] = []
        self.new_context()

    def new_context(self) -> None:
        """A fresh profile (no history, no storage) with one page."""
        if self.context is not None:
            self.context.close()
        self.context = self.browser.new_context(
            viewport={"width": WIDTH, "height": HEIGHT}, accept_downloads=True
        )
        self.context.set_default_timeout(20_000)
        self.context.add_init_script(COLLECTOR)
        self.page = self.context.new_page()
        # Scripts through Chromium's own protocol: Playwright's evaluate would count as a user
        # gesture (and grant autoplay), which WebDriver's scripts in the other engines do not.
        self.cdp = self.context.new_cdp_session(self.page)
        self.page.on("console", self._on_console)
        self.page.on("pageerror", lambda e: self.console.append(f"pageerror: {e}"))

    def _on_console(self, message: Any) -> None:
        if message.type == "error":
            self.console.append(f"console: {message.text}")

    def goto(self, url: str) -> None:
        # A new scenario: the last one's errors were its own. Its page is left first: its server
        # is gone, and its event stream's reconnects would log refused connections into this one.
        self.page.goto("about:blank")
        self.console.clear()
        self.page.goto(url)

    def reload(self) -> None:
        self.page.reload()

    def run(self, body: str, *args: Any) -> Any:
        expression = (
            f"(async (args) => {{ {body} }})({json.dumps(list(args))}).then("
            "(v) => v === undefined ? null : v, (e) => ({ __error: String(e && e.stack || e) }))"
        )
        answer = self.cdp.send(
            "Runtime.evaluate",
            {
                "expression": expression,
                "awaitPromise": True,
                "returnByValue": True,
                "userGesture": False,
            },
        )
        if "exceptionDetails" in answer:
            raise ScriptError(str(answer["exceptionDetails"]))
        return _checked(answer["result"].get("value"))

    def run_without_gesture(self, expression: str) -> None:
        self.run(expression)

    def click(self, css: str) -> None:
        self.page.click(css)

    def type(self, css: str, text: str) -> None:
        if len(text) <= TYPE_KEYS_UP_TO:
            self.page.fill(css, "")
            self.page.type(css, text)
        else:
            self.run(_set_value_js(), css, text)

    def screenshot(self, path: Path) -> None:
        # Through Chromium's protocol too: Playwright's screenshot gives the page a user
        # activation (it resumes a suspended AudioContext).
        answer = self.cdp.send("Page.captureScreenshot", {"format": "png"})
        path.write_bytes(base64.b64decode(answer["data"]))

    def errors(self) -> list[str]:
        return [*self.console, *(self.run("return window.__pageErrors || [];") or [])]

    def close(self) -> None:
        self.context.close()
        self.browser.close()


# ------------------------------------------------------------------------------------ WebDriver


class _WebDriverBase:
    """Marionette and Selenium share WebDriver's shape: elements by CSS, async scripts."""

    engine = ""

    def _execute_async(self, script: str, args: list[Any]) -> Any:
        raise NotImplementedError

    def _find(self, css: str) -> Any:
        raise NotImplementedError

    def run(self, body: str, *args: Any) -> Any:
        return _checked(self._execute_async(ASYNC_WRAPPER % body, list(args)))

    def run_without_gesture(self, expression: str) -> None:
        self.run(expression)  # WebDriver scripts carry no user activation

    def install_collector(self) -> None:
        self.run(COLLECTOR)

    def click(self, css: str) -> None:
        element = self._find(css)
        with contextlib.suppress(Exception):
            self.run("document.querySelector(args[0]).scrollIntoView({block: 'center'});", css)
        element.click()

    def type(self, css: str, text: str) -> None:
        if len(text) > TYPE_KEYS_UP_TO:
            self.run(_set_value_js(), css, text)
            return
        element = self._find(css)
        element.clear()
        element.send_keys(text)

    def errors(self) -> list[str]:
        return list(self.run("return window.__pageErrors || [];") or [])


class FirefoxDriver(_WebDriverBase):
    engine = "firefox"

    def __init__(self, env: dict[str, str], log: Path) -> None:
        from marionette_driver.marionette import Marionette

        prefs = {
            # WebDriver clicks are user gestures; what a person allows on a site they use.
            "media.autoplay.default": 0,
            "browser.shell.checkDefaultBrowser": False,
            "datareporting.policy.dataSubmissionEnabled": False,
            "toolkit.telemetry.reportingpolicy.firstRun": False,
        }
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)  # mozrunner starts Firefox with this process's environment
        try:
            self.client = Marionette(
                bin=FIREFOX, headless=True, prefs=prefs, startup_timeout=60, gecko_log=str(log)
            )
            self.client.start_session()
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        self.client.timeout.script = SCRIPT_TIMEOUT_S
        self.client.set_window_rect(width=WIDTH, height=HEIGHT)

    def goto(self, url: str) -> None:
        self.client.navigate(url)
        self.install_collector()

    def reload(self) -> None:
        self.client.refresh()
        self.install_collector()

    def _execute_async(self, script: str, args: list[Any]) -> Any:
        return self.client.execute_async_script(script, script_args=args, sandbox=None)

    def _find(self, css: str) -> Any:
        return self.client.find_element("css selector", css)

    def set_pref(self, name: str, value: Any) -> None:
        with self.client.using_context("chrome"):
            self.client.execute_script(
                "Services.prefs.setIntPref(arguments[0], arguments[1]);", script_args=[name, value]
            )

    def screenshot(self, path: Path) -> None:
        path.write_bytes(self.client.screenshot(format="binary", full=True))

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.cleanup()


class WebKitDriver(_WebDriverBase):
    engine = "webkit"

    def __init__(self, env: dict[str, str]) -> None:
        from selenium import webdriver
        from selenium.webdriver.webkitgtk.options import Options
        from selenium.webdriver.webkitgtk.service import Service

        options = Options()
        options.binary_location = MINIBROWSER
        options.add_argument("--automation")
        service_env = {**os.environ, **env}
        self._start = lambda: webdriver.WebKitGTK(
            options=options, service=Service(executable_path=WEBKIT_DRIVER, env=service_env)
        )
        self.driver = self._open()

    def _open(self) -> Any:
        driver = self._start()
        driver.set_script_timeout(SCRIPT_TIMEOUT_S)
        driver.set_window_size(WIDTH, HEIGHT)
        return driver

    def revive(self) -> None:
        """A new session where WebKit's web process died under the last one ("session deleted
        because of page crash or hang": seen once in a full suite on a loaded 2-core machine).
        The scenario is then rerun once (`WEBKIT_CRASH` in the browser tests' rerun marker)."""
        try:
            self.driver.title  # noqa: B018 (a command, to learn whether the session lives)
        except Exception:
            with contextlib.suppress(Exception):
                self.driver.quit()
            self.driver = self._open()

    def goto(self, url: str) -> None:
        self.driver.get(url)
        self.install_collector()

    def reload(self) -> None:
        self.driver.refresh()
        self.install_collector()

    def _execute_async(self, script: str, args: list[Any]) -> Any:
        return self.driver.execute_async_script(script, *args)

    def _find(self, css: str) -> Any:
        from selenium.webdriver.common.by import By

        return self.driver.find_element(By.CSS_SELECTOR, css)

    def screenshot(self, path: Path) -> None:
        self.driver.save_screenshot(str(path))  # the viewport: WebKitWebDriver has no full page

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.driver.quit()


def wait_for(driver: Driver, body: str, *args: Any, timeout: float = 30, what: str = "") -> Any:
    """Poll a script until it returns something truthy; its last answer on failure."""
    deadline = time.monotonic() + timeout
    while True:
        value = driver.run(body, *args)
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{driver.engine}: timed out waiting for {what or body!r}: {value!r}"
            )
        time.sleep(0.1)
