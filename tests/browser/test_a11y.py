"""The demo page in a real Chromium: a small screen, both colour schemes, keyboard only."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Console, WebProcess
from tests.browser.helpers import ENGLISH, assert_no_console_errors, card_of, cards, open_page

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_small_screen_dark_scheme_and_keyboard(
    scheme: str,
    web: WebProcess,
    worker: Any,
    new_page: Callable[..., Any],
    console: Console,
    shot: Callable[..., Any],
) -> None:
    page = open_page(new_page, web.url, viewport={"width": 360, "height": 780}, color_scheme=scheme)
    # Everything with the keyboard only: type, submit with Ctrl+Enter, reach the job's controls.
    page.keyboard.press("Tab")
    expect(page.locator(".skip-link")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#text")).to_be_focused()
    page.keyboard.type(ENGLISH)
    page.keyboard.press("Control+Enter")
    expect(cards(page)).to_have_count(1)
    card = card_of(page, cards(page).first.get_attribute("data-job-id"))
    expect(card).to_have_attribute("data-state", "succeeded", timeout=30_000)
    reached: list[str] = []
    for _ in range(30):
        page.keyboard.press("Tab")
        reached.append(
            page.evaluate(
                "() => { const e = document.activeElement;"
                " return e.id || e.dataset.action || e.dataset.role || e.tagName.toLowerCase(); }"
            )
        )
    for control in (
        "voice",
        "preview",
        "format",
        "speed",
        "live-play",
        "submit",
        "download",
        "curl",
        "remove",
    ):
        assert control in reached, (control, reached)
    # A visible focus ring.
    page.focus("#submit")
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Tab")
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline not in ("", "none")
    # Every control is labelled; nothing overflows 360 px.
    unlabelled = page.evaluate(
        """() => [...document.querySelectorAll('input, select, textarea, button, audio')]
            .filter(e => e.offsetParent !== null)
            .filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label')
                         && !e.textContent.trim())
            .map(e => e.outerHTML.slice(0, 80))"""
    )
    assert unlabelled == []
    assert page.evaluate("document.documentElement.scrollWidth") <= 360
    page.evaluate("window.scrollTo(0, 0)")
    shot(page, f"mobile-{scheme}")
    page.set_viewport_size({"width": 1280, "height": 900})
    shot(page, f"desktop-{scheme}")
    assert_no_console_errors(console)
