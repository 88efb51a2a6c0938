"""The demo page in a real Chromium: every error explained, failures shown, user text kept inert."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
import redis
from playwright.sync_api import expect

from core.infra.settings import Settings
from core.queue.keys import Keys
from tests.browser.conftest import Console, WebProcess
from tests.browser.helpers import (
    ENGLISH,
    assert_no_console_errors,
    cards,
    open_page,
    submit,
    timeline,
)

pytestmark = pytest.mark.browser


def test_user_text_is_rendered_as_text(
    web: WebProcess,
    worker: Any,
    new_page: Callable[..., Any],
    console: Console,
) -> None:
    page = open_page(new_page, web.url)
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    payload = (
        '<img src=x onerror="window.pwned=1;alert(1)"> </script><script>window.pwned=2</script>'
        " <b>bold</b> & \"quotes\" 'single' speak this"
    )
    card = submit(page, payload, voice="en_male")
    expect(card).to_have_attribute("data-state", "succeeded", timeout=30_000)

    def check() -> None:
        text = cards(page).first.locator("[data-role=text]")
        expect(text).to_have_text(payload)
        assert text.locator("img, script, b").count() == 0
        assert page.locator("#job-list img, #job-list script").count() == 0
        assert page.evaluate("window.pwned") is None
        assert dialogs == []

    check()
    page.reload()  # rendered again from localStorage
    expect(cards(page)).to_have_count(1)
    check()
    assert_no_console_errors(console)


def test_every_error_is_explained(
    settings: Settings,
    start_web: Callable[..., WebProcess],
    new_page: Callable[..., Any],
    console: Console,
    shot: Callable[..., Any],
) -> None:
    # One active job per client and no worker: the second submission is refused (429).
    web = start_web(
        settings.replace(max_active_per_client=1, max_text_chars=300, max_document_chars=400)
    )
    page = open_page(new_page, web.url)
    alert = page.locator("#form-error")

    # Longer than a job, within a document: said, and taken (made in parts).
    page.fill("#text", "a" * 350)
    expect(page.locator("#char-count")).to_have_text("350 / 400")
    expect(page.locator("#text-msg")).to_have_text(re.compile(r"A document of 350 characters"))
    expect(page.locator("#text")).not_to_have_attribute("aria-invalid", "true")
    # Too long: said before anything is sent, with by how much.
    page.fill("#text", "a" * 405)
    expect(page.locator("#char-count")).to_have_text("405 / 400")
    expect(page.locator("#text-msg")).to_have_text(re.compile(r"Too long by 5 characters"))
    expect(page.locator("#text")).to_have_attribute("aria-invalid", "true")
    page.click("#submit")
    expect(cards(page)).to_have_count(0)
    shot(page, "desktop-light-too-long")

    # Nothing to say.
    page.fill("#text", "   ")
    page.click("#submit")
    expect(page.locator("#text-msg")).to_have_text("Type some text first.")

    # A value the server refuses: its message, and the field it names gets the focus. (eSpeak
    # NG ignores the temperature, so the page hides it: shown again here, as for ChatTTS.)
    page.fill("#text", "Hello there.")
    page.evaluate(
        "() => { document.querySelector('details.advanced').hidden = false;"
        " document.getElementById('temperature').closest('.field').hidden = false; }"
    )
    page.locator("details.advanced summary").click()
    page.fill("#temperature", "5")
    page.click("#submit")
    expect(alert).to_be_visible()
    expect(alert).to_contain_text("temperature")
    expect(page.locator("#temperature")).to_be_focused()
    expect(page.locator("#temperature")).to_have_attribute("aria-invalid", "true")
    page.fill("#temperature", "")

    # Rate limited: when to try again, counting down.
    submit(page, "Hello there.")
    page.click("#submit")
    expect(alert.locator("#form-error-title")).to_have_text("Too many requests")
    expect(alert).to_contain_text(re.compile(r"try again in \d+ s"))
    shot(page, "desktop-light-rate-limited")
    expect(alert).to_contain_text("You can try again now.", timeout=10_000)
    expect(cards(page)).to_have_count(1)

    # Server unavailable: a web process whose Redis is gone answers 503.
    dead = start_web(settings.replace(redis_url="redis://127.0.0.1:9/0"))
    page2 = new_page()
    page2.goto(dead.url)
    page2.fill("#text", "Hello there.")
    page2.click("#submit")
    expect(page2.locator("#form-error-title")).to_have_text("Service unavailable")
    expect(page2.locator("#form-error")).not_to_contain_text("Traceback")
    shot(page2, "desktop-light-unavailable")

    # No server at all: said as such, and the live connection shows it is down.
    dead.stop()
    page2.click("#submit")
    expect(page2.locator("#form-error-title")).to_have_text("Cannot reach the server")
    expect(page2.locator("#conn")).to_have_attribute("data-state", "down")
    expect(page2.locator("#conn-banner")).to_be_visible()
    # Failed requests show in the console as such; nothing else may.
    others = [
        e
        for e in console.errors
        if "Failed to load resource" not in e and "EventSource" not in e and "net::ERR_" not in e
    ]
    assert others == [], others


def test_failed_job_shows_the_reason_and_retry_explains_refusal(
    web: WebProcess,
    start_worker: Callable[..., Any],
    keys: Keys,
    settings: Settings,
    new_page: Callable[..., Any],
    console: Console,
    shot: Callable[..., Any],
) -> None:
    # A registered voice, removed by its owner after the job was queued: the worker fails the
    # job with a reason (a real failure through the real pipeline).
    r = redis.Redis.from_url(settings.redis.redis_url or "")
    voice = {"language": "en-US", "gender": "female", "description": "Guest voice"}
    r.hset(keys.voices, "guest", json.dumps(voice))
    try:
        page = open_page(new_page, web.url)
        expect(page.locator("#voice option[value=guest]")).to_have_text("Guest voice")
        card = submit(page, ENGLISH, voice="guest")
        expect(card).to_have_attribute("data-state", "queued")
        r.hdel(keys.voices, "guest")
        start_worker()
        expect(card).to_have_attribute("data-state", "failed", timeout=30_000)
        status = card.locator("[data-role=status]")
        expect(status).to_have_text(re.compile(r"^Failed: voice 'guest' is not registered"))
        expect(status).to_have_attribute("data-kind", "error")
        assert timeline(card)[-1] == "failed"

        # Retrying now is refused by the server; the card says why, nothing is added.
        card.locator("[data-action=retry]").click()
        refusal = card.locator("[data-role=action-error]")
        expect(refusal).to_have_text(re.compile(r"^Retry failed: Unknown voice 'guest'"))
        expect(status).to_have_text(re.compile(r"^Failed: voice 'guest' is not registered"))
        expect(cards(page)).to_have_count(1)
        shot(page, "desktop-light-failed")
        others = [e for e in console.errors if "Failed to load resource" not in e]
        assert others == [], others
    finally:
        r.delete(keys.voices)
        r.close()
