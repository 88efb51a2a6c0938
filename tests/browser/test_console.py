"""The operators' console page in Blink, Gecko and WebKit, against a real web process, Redis and
worker processes: sign in, requeue a dead job, pause intake and see a script refused; and in
Chromium, keyboard only, with what a screen reader is told."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import expect

from core.infra.settings import Settings
from tests.browser.conftest import ARTIFACTS, Console
from tests.browser.engines import WEBKIT_CRASH, Driver, WebKitDriver, wait_for
from tests.browser.helpers import assert_no_console_errors, get_json
from tests.conftest import WorkerProcess
from tests.web.webproc import WebProcess

pytestmark = [pytest.mark.browser, pytest.mark.flaky(reruns=1, only_rerun=[WEBKIT_CRASH])]

ADMIN_KEY = "console-key-4242"


@pytest.fixture(autouse=True)
def live_driver(request: pytest.FixtureRequest) -> None:
    """Each cross-engine scenario starts in a live session (a new one after a WebKit crash)."""
    if "driver" in request.fixturenames:
        driver = request.getfixturevalue("driver")
        if isinstance(driver, WebKitDriver):
            driver.revive()


@pytest.fixture
def console_web(start_web: Callable[..., WebProcess], settings: Settings) -> WebProcess:
    return start_web(settings.replace(admin_keys=ADMIN_KEY))


def post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """A script's submission: no browser, no cookie."""
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def dead_job(web: WebProcess, start_worker: Callable[..., WorkerProcess]) -> str:
    """A job a worker allowed no delivery gave up on (dead, in the dead letters); then a worker
    that can read it."""
    status, job = post(f"{web.url}/v1/tts/jobs", {"text": "Try me again.", "voice": "en_male"})
    assert status == 202, job
    reaper = start_worker("reaper", CHATTTS_MAX_DELIVERIES="0")
    deadline = time.monotonic() + 30
    while get_json(f"{web.url}/v1/tts/jobs/{job['id']}")["state"] != "dead":
        assert time.monotonic() < deadline, "the job never died"
        time.sleep(0.05)
    reaper.stop()
    start_worker("healthy")
    return str(job["id"])


def sign_in(driver: Driver, url: str) -> None:
    driver.goto(f"{url}/admin")
    wait_for(driver, "return !!document.getElementById('admin-key');", what="the sign-in form")
    driver.type("#admin-key", ADMIN_KEY)
    driver.click("#sign-in button[type=submit]")
    # The page reloads once signed in: between the two documents there is no #main yet.
    wait_for(
        driver,
        'const main = document.getElementById("main"); return main?.dataset.live === "yes";',
        what="live",
    )


def test_a_dead_job_requeued_and_intake_paused_from_the_page(
    driver: Driver,
    console_web: WebProcess,
    start_worker: Callable[..., WorkerProcess],
) -> None:
    web = console_web
    job_id = dead_job(web, start_worker)
    sign_in(driver, web.url)
    row = f'#dlq tr[data-job-id="{job_id}"]'
    wait_for(driver, f"return !!document.querySelector('{row} button');", what="the dead letter")
    driver.click(f"{row} button")  # Requeue
    deadline = time.monotonic() + 30
    while get_json(f"{web.url}/v1/tts/jobs/{job_id}")["state"] != "succeeded":
        assert time.monotonic() < deadline, "the requeued job did not succeed"
        time.sleep(0.1)
    wait_for(driver, f"return !document.querySelector('{row}');", what="the letter gone")
    wait_for(
        driver,
        "return document.getElementById('status').textContent.includes('done');",
        what="the status line",
    )

    driver.type("#pause-reason", "maintenance")
    driver.click("#pause")
    wait_for(
        driver,
        "return document.getElementById('intake').dataset.state === 'paused';",
        what="paused",
    )
    status, body = post(f"{web.url}/v1/tts/jobs", {"text": "Let me in."})
    assert status == 503 and body["error"]["code"] == "paused", body
    assert "maintenance" in body["error"]["message"]
    driver.click("#resume")
    wait_for(
        driver, "return document.getElementById('intake').dataset.state === 'open';", what="open"
    )
    assert post(f"{web.url}/v1/tts/jobs", {"text": "Let me in."})[0] == 202
    actions = driver.run(
        "return [...document.querySelectorAll('#audit tbody tr td:nth-child(3)')]"
        ".map((td) => td.textContent);"
    )
    assert actions[:3] == ["queue.resume", "queue.pause", "dlq.requeue"], actions
    # The pause's reason in its row; times as the command line prints them; no dead letters
    # left: said so, and no bulk buttons acting on nothing.
    details = driver.run(
        "return [...document.querySelectorAll('#audit tbody tr')]"
        ".map((tr) => [tr.children[0].textContent, tr.children[4].textContent]);"
    )
    assert details[1][1] == "maintenance", details
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", details[0][0]), details
    wait_for(
        driver,
        "return !document.getElementById('dlq-empty').hidden"
        " && document.getElementById('dlq-bulk').hidden;",
        what="the empty dead letters said so",
    )
    rates = driver.run(
        "return [...document.querySelectorAll('#counts dd')].filter((dd) =>"
        " dd.dataset.figure.includes('/s')).map((dd) => dd.textContent);"
    )
    assert rates and all(re.fullmatch(r"\d+(\.\d{1,2})?", r) for r in rates), rates
    driver.screenshot(ARTIFACTS / f"console-{driver.engine}.png")
    assert driver.errors() == []


def test_the_console_by_keyboard_and_as_a_screen_reader_hears_it(
    console_web: WebProcess,
    start_worker: Callable[..., WorkerProcess],
    new_page: Callable[..., Any],
    console: Console,
) -> None:
    web = console_web
    job_id = dead_job(web, start_worker)
    page = new_page()
    page.goto(f"{web.url}/admin")
    page.keyboard.press("Tab")
    expect(page.locator(".skip-link")).to_be_focused()
    page.get_by_label("Admin key").focus()
    page.keyboard.type(ADMIN_KEY)
    page.keyboard.press("Enter")  # the form submits
    expect(page.locator("#main")).to_have_attribute("data-live", "yes")
    # Every region and control has a name a screen reader says.
    for name in ("Queue", "Dead letters", "Workers", "Jobs", "Usage", "Audit"):
        expect(page.get_by_role("region", name=name)).to_be_visible()
    for caption in ("Waiting, by lane", "Every live worker"):
        expect(page.get_by_role("table", name=caption)).to_be_visible()
    requeue = page.get_by_role("button", name=f"Requeue job {job_id}")
    expect(requeue).to_be_visible()
    # Reached with Tab alone, kept focused through the live refreshes, pressed with Enter.
    for _ in range(40):
        page.keyboard.press("Tab")
        if page.evaluate("() => document.activeElement.getAttribute('aria-label')") == (
            f"Requeue job {job_id}"
        ):
            break
    else:
        raise AssertionError("Tab never reached the Requeue button")
    time.sleep(1.5)  # a live refresh or two
    assert page.evaluate("() => document.activeElement.getAttribute('aria-label')") == (
        f"Requeue job {job_id}"
    )
    page.keyboard.press("Enter")
    expect(page.get_by_role("status")).to_contain_text(f"Requeue {job_id}: done")
    expect(page.locator(f'#dlq tr[data-job-id="{job_id}"]')).to_have_count(0)
    assert_no_console_errors(console)
