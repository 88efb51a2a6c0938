"""The demo page in a real Chromium: cancelling queued and running jobs, retrying them."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Console, WebProcess
from tests.browser.helpers import (
    LONG_ENGLISH,
    assert_no_console_errors,
    audio_duration,
    card_of,
    cards,
    get_json,
    open_page,
    submit,
    timeline,
)

pytestmark = pytest.mark.browser


def test_cancel_queued_then_retry(
    web: WebProcess,
    start_worker: Callable[..., Any],
    new_page: Callable[..., Any],
    console: Console,
    shot: Callable[..., Any],
) -> None:
    # A browser that cannot read a fetch body as a stream: live playback falls back to fetching
    # the finished segments (the chunk stream is in test_engines.py, in all three engines).
    page = new_page()
    page.add_init_script("delete Response.prototype.body;")
    page.goto(web.url)
    expect(page.locator("#conn")).to_have_attribute("data-state", "live")
    segment_requests: list[str] = []
    page.on("request", lambda r: "/segments/" in r.url and segment_requests.append(r.url))
    card = submit(page, LONG_ENGLISH, voice="en_male")  # no worker yet: it waits in the queue
    expect(card).to_have_attribute("data-state", "queued")
    expect(card.locator("[data-role=status]")).to_have_text(re.compile(r"Next in line|ahead"))
    expect(card.locator("[data-role=time]")).to_have_text(re.compile(r"^[1-9]\.\d s$"))  # ticks
    shot(page, "desktop-light-queued")

    card.locator("[data-action=cancel]").click()
    expect(card).to_have_attribute("data-state", "cancelled")
    assert timeline(card)[-1] == "cancelled"
    job_id = card.get_attribute("data-job-id")
    assert get_json(f"{web.url}/v1/tts/jobs/{job_id}")["state"] == "cancelled"
    expect(card.locator("[data-action=cancel]")).to_be_hidden()

    # Retry submits the same request again; a worker now takes it to the end.
    card.locator("[data-action=retry]").click()
    expect(cards(page)).to_have_count(2)
    retried = card_of(page, cards(page).first.get_attribute("data-job-id"))
    assert retried.get_attribute("data-job-id") != card.get_attribute("data-job-id")
    expect(retried.locator("[data-role=text]")).to_have_text(LONG_ENGLISH)
    start_worker()
    # Its segments play as they arrive (Web Audio), before the whole file exists.
    assert page.evaluate("() => !('body' in Response.prototype)")
    live = retried.locator("[data-role=live]")
    expect(live).to_have_attribute("data-status", "playing", timeout=30_000)
    expect(live).to_be_visible()
    expect(retried).to_have_attribute("data-state", "succeeded", timeout=60_000)
    assert len(segment_requests) > 2, segment_requests
    assert all(
        f"/v1/tts/jobs/{retried.get_attribute('data-job-id')}/segments/" in u
        for u in segment_requests
    )
    # One player at a time: the finished file's waits while the stream still plays.
    expect(live).to_be_visible()
    expect(retried.locator("[data-role=audio]")).to_be_hidden()
    live.locator("[data-action=stop-live]").click()
    expect(live).to_be_hidden()
    expect(retried.locator("[data-role=audio]")).to_be_visible()
    assert audio_duration(retried) > 5
    assert_no_console_errors(console)


def test_cancel_running_job(
    web: WebProcess,
    worker: Any,
    new_page: Callable[..., Any],
    console: Console,
    shot: Callable[..., Any],
) -> None:
    page = open_page(new_page, web.url)
    page.uncheck("#live-play")
    text = (LONG_ENGLISH + " ") * 2
    card = submit(page, text[:3900], voice="en_female")
    expect(card).to_have_attribute("data-state", "running", timeout=20_000)
    expect(card.locator("[data-role=status]")).to_have_text(re.compile(r"Segment \d+ of \d+"))
    expect(card.locator("progress")).to_be_visible()
    shot(page, "desktop-light-running")
    card.locator("[data-action=cancel]").click()
    expect(card).to_have_attribute("data-state", "cancelled", timeout=20_000)
    expect(card.locator("[data-role=audio]")).to_be_hidden()
    assert_no_console_errors(console)
