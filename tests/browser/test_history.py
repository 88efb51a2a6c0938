"""The demo page in a real Chromium: history across reloads and from the server (the caller's
jobs), events replayed after a drop."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Console, TcpProxy, WebProcess
from tests.browser.helpers import (
    CHINESE,
    ENGLISH,
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


def test_reload_keeps_history_and_replays_missed_events(
    web: WebProcess,
    start_worker: Callable[..., Any],
    new_page: Callable[..., Any],
    console: Console,
    shot: Callable[..., Any],
) -> None:
    worker = start_worker()
    page = open_page(new_page, web.url)
    first = submit(page, ENGLISH, voice="en_male")
    expect(first).to_have_attribute("data-state", "succeeded", timeout=30_000)
    first_id = first.get_attribute("data-job-id")
    worker.stop()
    second = submit(page, CHINESE, voice="zh_male")  # stays queued: no worker
    second_id = second.get_attribute("data-job-id")
    expect(second).to_have_attribute("data-state", "queued")

    page.reload()
    expect(cards(page)).to_have_count(2)
    assert [c.get_attribute("data-job-id") for c in cards(page).all()] == [second_id, first_id]
    expect(cards(page).nth(1)).to_have_attribute("data-state", "succeeded")
    expect(cards(page).first).to_have_attribute("data-state", "queued")
    assert audio_duration(cards(page).nth(1)) > 0.5

    # The tab is closed while the job runs; the next visit replays what it missed.
    context = page.context
    page.close()
    start_worker()
    deadline = time.monotonic() + 30
    while get_json(f"{web.url}/v1/tts/jobs/{second_id}")["state"] != "succeeded":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    page = new_page(context)
    page.goto(web.url)
    card = card_of(page, second_id)
    expect(card).to_have_attribute("data-state", "succeeded")
    expect(card.locator("[data-role=text]")).to_have_text(CHINESE)
    types = timeline(card)
    assert types.count("running") == 1 and types.count("succeeded") == 1, types
    assert types.index("running") < types.index("succeeded")
    assert audio_duration(card) > 0.5
    assert_no_console_errors(console)


def test_event_connection_drop_recovers_without_losing_events(
    web: WebProcess,
    start_worker: Callable[..., Any],
    make_proxy: Callable[[int], TcpProxy],
    new_page: Callable[..., Any],
    console: Console,
    shot: Callable[..., Any],
) -> None:
    proxy = make_proxy(web.port)
    page = open_page(new_page, proxy.url)
    card = submit(page, LONG_ENGLISH, voice="en_female")
    expect(card).to_have_attribute("data-state", "queued")
    job_id = card.get_attribute("data-job-id")

    # Cut the network: the live connection drops and reconnection attempts fail.
    proxy.refusing = True
    proxy.cut()
    expect(page.locator("#conn")).to_have_attribute("data-state", "down")
    expect(page.locator("#conn-banner")).to_contain_text("interrupted")
    shot(page, "desktop-light-connection-lost")

    # Meanwhile the whole job runs: every one of its events happens while the page is cut off.
    start_worker()
    deadline = time.monotonic() + 60
    while get_json(f"{web.url}/v1/tts/jobs/{job_id}")["state"] != "succeeded":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    expect(card).to_have_attribute("data-state", "queued")

    proxy.refusing = False
    expect(page.locator("#conn")).to_have_attribute("data-state", "live", timeout=30_000)
    expect(page.locator("#conn-banner")).to_contain_text("Reconnected")
    expect(card).to_have_attribute("data-state", "succeeded")
    shot(page, "desktop-light-reconnected")
    types = timeline(card)
    assert types[0] == "queued" and types[-1] == "succeeded", types
    assert types.count("running") == 1 and types.count("succeeded") == 1, types
    assert "progress" in types, types
    # The browser resumed from its cursor (Last-Event-ID header, or the query on a fresh open).
    resumed = [
        h
        for h in proxy.heads[1:]
        if h.startswith("GET /v1/events")
        and ("last-event-id:" in h.lower() or "last_event_id=" in h)
    ]
    assert len(resumed) >= 1, proxy.heads
    assert audio_duration(card) > 5
    # The cut itself makes Chromium log failed requests; nothing else may appear.
    others = [e for e in console.errors if "net::ERR_" not in e]
    assert others == [], others


def test_history_comes_back_from_the_server_where_the_browser_kept_none(
    web: WebProcess, worker: Any, new_page: Callable[..., Any], console: Console
) -> None:
    """The list is this client's own jobs (GET /v1/tts/jobs): a browser whose storage was
    cleared gets them back, a long text's start only (it cannot be sent again from there), and
    never a job a person removed from the list."""
    page = open_page(new_page, web.url)
    short = submit(page, ENGLISH, voice="en_male")
    long = submit(page, LONG_ENGLISH, voice="en_female")
    removed = submit(page, CHINESE, voice="zh_male")
    for card in (short, long, removed):
        expect(card).to_have_attribute("data-state", "succeeded", timeout=30_000)
    ids = [c.get_attribute("data-job-id") for c in (short, long, removed)]
    removed.locator("[data-action=remove]").click()
    expect(cards(page)).to_have_count(2)

    page.reload()  # the list this browser kept, and the server's: the removed job stays out
    expect(page.locator("#conn")).to_have_attribute("data-state", "live")
    page.wait_for_load_state("networkidle")
    expect(cards(page)).to_have_count(2)
    assert card_of(page, ids[2]).count() == 0

    # A browser that kept nothing, with the same identity (its cookie).
    cookies = page.context.cookies()
    page = new_page()
    page.context.add_cookies(cookies)
    page.goto(web.url)
    expect(page.locator("#conn")).to_have_attribute("data-state", "live")
    expect(cards(page)).to_have_count(3)
    back_long = card_of(page, ids[1])
    expect(back_long).to_have_attribute("data-state", "succeeded")
    text = back_long.locator("[data-role=text]").text_content() or ""
    assert text.endswith("…") and LONG_ENGLISH.startswith(text[:-1]) and len(text) == 501
    assert back_long.locator("[data-action=curl]").is_hidden()
    back_short = card_of(page, ids[0])
    expect(back_short).to_have_attribute("data-state", "succeeded")
    assert back_short.locator("[data-role=text]").text_content() == ENGLISH
    assert back_short.locator("[data-action=curl]").is_visible()
    assert audio_duration(back_short) > 0.3
    assert_no_console_errors(console)
