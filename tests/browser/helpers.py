"""Helpers of the browser tests: texts to speak and what a test does on the demo page."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable
from typing import Any

from playwright.sync_api import expect

from tests.browser.conftest import Console

ENGLISH = "Hello from the browser test. The quick brown fox jumps over the lazy dog."
CHINESE = "你好，欢迎使用在线语音合成服务。今天天气很好。"
# Long enough for several segments (the espeak engine cuts at about 200 characters).
LONG_ENGLISH = " ".join(
    f"This is sentence number {i} of a long text that the worker synthesizes in segments."
    for i in range(1, 25)
)


def open_page(new_page: Callable[..., Any], url: str, **options: Any) -> Any:
    page = new_page(**options)
    page.goto(url)
    expect(page.locator("#conn")).to_have_attribute("data-state", "live")
    return page


def cards(page: Any) -> Any:
    return page.locator("#job-list > li")


def submit(
    page: Any,
    text: str,
    *,
    voice: str | None = None,
    fmt: str | None = None,
    keyboard: bool = False,
) -> Any:
    before = cards(page).count()
    page.fill("#text", text)
    if voice:
        page.select_option("#voice", voice)
    if fmt:
        page.select_option("#format", fmt)
    if keyboard:
        page.focus("#text")
        page.keyboard.press("Control+Enter")
    else:
        page.click("#submit")
    expect(cards(page)).to_have_count(before + 1)
    job_id = cards(page).first.get_attribute("data-job-id")  # newest first
    assert job_id
    return card_of(page, job_id)


def card_of(page: Any, job_id: str) -> Any:
    return page.locator(f"#job-list > li[data-job-id='{job_id}']")


def timeline(card: Any) -> list[str]:
    details = card.locator("details.job-details")
    if not details.evaluate("d => d.open"):
        details.locator("summary").click()
    expect(card.locator("[data-role=timeline] li").first).to_be_attached()
    return card.locator("[data-role=timeline] li").evaluate_all(
        "items => items.map(i => i.dataset.type)"
    )


def audio_duration(card: Any) -> float:
    """The duration of the card's finished file, once its player shows: where the page still
    plays the job as it was made (one player at a time), it is stopped first, as a person
    stops it to play the file."""
    audio = card.locator("audio")
    stop = card.locator("[data-action=stop-live]")
    deadline = time.monotonic() + 60
    while not audio.is_visible():
        assert time.monotonic() < deadline, "the card never showed its file's player"
        if stop.is_visible():
            stop.evaluate("button => button.click()")  # as a click, without waiting on it
        time.sleep(0.2)
    expect(audio).to_be_visible()
    return float(
        audio.evaluate(
            """a => new Promise((resolve, reject) => {
            if (a.readyState >= 1 && a.duration > 0) return resolve(a.duration);
            a.addEventListener('loadedmetadata', () => resolve(a.duration), {once: true});
            a.addEventListener('error', () => reject(new Error('audio error')), {once: true});
            if (a.preload === 'none') a.load();
        })"""
        )
    )


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def assert_no_console_errors(console: Console) -> None:
    assert console.errors == [], console.errors
