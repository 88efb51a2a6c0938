"""The demo page in a real Chromium: submitting text, listening, downloading, previewing a voice."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable
from typing import Any

import pytest
import soundfile as sf
from playwright.sync_api import expect

from tests.browser.conftest import Console, WebProcess
from tests.browser.helpers import (
    CHINESE,
    ENGLISH,
    assert_no_console_errors,
    audio_duration,
    cards,
    get_json,
    submit,
    timeline,
)

pytestmark = pytest.mark.browser


def test_submit_listen_download_english_and_chinese(
    web: WebProcess,
    worker: Any,
    new_page: Callable[..., Any],
    console: Console,
    shot: Callable[..., Any],
) -> None:
    page = new_page()
    requests: list[Any] = []
    page.on("request", lambda r: requests.append(r))
    response = page.goto(web.url)
    expect(page.locator("#conn")).to_have_attribute("data-state", "live")
    # Under the strict policy (a violation would be a console error, asserted at the end)...
    assert "script-src 'self'" in response.headers["content-security-policy"]
    # ... with a handful of requests, all to this origin: 1 HTML, 4 CSS, at most 12 modules (all
    # named in the HTML, so they load in parallel), the voice list, the jobs list the history
    # merges and the event stream.
    kinds = [r.resource_type for r in requests]
    assert kinds.count("document") == 1 and kinds.count("stylesheet") == 4
    assert 1 <= kinds.count("script") <= 12
    assert len(requests) <= 20, [r.url for r in requests]
    assert all(r.url.startswith(web.url) for r in requests)
    expect(page.locator("#empty")).to_be_visible()
    shot(page, "desktop-light-empty")

    english = submit(page, ENGLISH, voice="en_female")
    expect(english).to_have_attribute("data-state", "succeeded", timeout=30_000)
    assert timeline(english)[:1] == ["queued"]
    assert {"running", "succeeded"} <= set(timeline(english))
    assert audio_duration(english) > 0.5
    expect(english.locator("[data-role=text]")).to_have_text(ENGLISH)

    chinese = submit(page, CHINESE, voice="zh_female", keyboard=True)  # Ctrl+Enter
    expect(chinese).to_have_attribute("data-state", "succeeded", timeout=30_000)
    assert {"queued", "running", "succeeded"} <= set(timeline(chinese))
    assert audio_duration(chinese) > 0.5
    english_id = english.get_attribute("data-job-id")
    expect(cards(page).nth(1)).to_have_attribute("data-job-id", english_id)

    # Download: a sensible name, a decodable file.
    with page.expect_download() as info:
        chinese.locator("[data-role=download]").click()
    download = info.value
    assert re.fullmatch(r"[\w.-]+\.wav", download.suggested_filename)
    path = download.path()
    samples, rate = sf.read(str(path))
    assert rate == 24_000
    assert len(samples) / rate > 0.5
    assert abs(samples).max() > 0.01  # not silence

    # Raw PCM cannot play in <audio> as it is: the page wraps it in a WAV header.
    pcm = submit(page, "Raw samples.", voice="en_male", fmt="pcm")
    expect(pcm).to_have_attribute("data-state", "succeeded", timeout=30_000)
    assert audio_duration(pcm) > 0.3
    assert pcm.locator("audio").get_attribute("src").startswith("blob:")

    shot(page, "desktop-light-succeeded")
    assert_no_console_errors(console)


def test_voice_preview_and_curl_command(
    web: WebProcess,
    worker: Any,
    browser: Any,
    new_page: Callable[..., Any],
    console: Console,
) -> None:
    context = browser.new_context(permissions=["clipboard-read", "clipboard-write"])
    try:
        page = new_page(context)
        page.goto(web.url)
        expect(page.locator("#conn")).to_have_attribute("data-state", "live")
        # The voices come from /v1/voices.
        voices = get_json(f"{web.url}/v1/voices")["voices"]
        options = page.locator("#voice option").evaluate_all("os => os.map(o => o.value)")
        assert options[0] == ""  # first and selected: the voice follows the text's language
        assert page.input_value("#voice") == ""
        assert sorted(options[1:]) == sorted(v["name"] for v in voices)
        # Only the settings the running engine honours are offered (eSpeak NG: speed alone, so
        # no advanced section at all), from its capabilities.
        expect(page.locator("details.advanced")).to_be_hidden()
        expect(page.locator("#speed")).to_be_visible()

        page.select_option("#voice", "en_male")
        page.click("#preview")
        audio = page.locator("#preview-audio")
        expect(audio).to_have_attribute("src", re.compile(r"/v1/tts/jobs/\w+/audio"))
        page.wait_for_function(
            "() => { const a = document.getElementById('preview-audio');"
            " return a.currentTime > 0 || a.ended; }"
        )
        expect(cards(page)).to_have_count(0)  # a preview is not a job of the list

        text = 'It\'s a "quoted" test; $HOME `date` stays literal.'
        card = submit(page, text, voice="en_female", fmt="flac")
        expect(card).to_have_attribute("data-state", "succeeded", timeout=30_000)
        card.locator("[data-action=curl]").click()
        expect(card.locator("[data-action=curl]")).to_have_text("Copied ✓")
        command = page.evaluate("navigator.clipboard.readText()")
        assert command.startswith(f"curl -sS -X POST '{web.url}/v1/tts/jobs'")
        if shutil.which("curl") and shutil.which("bash"):
            # The command really reproduces the request (quotes, $ and backticks stay literal).
            result = subprocess.run(
                ["bash", "-c", command], capture_output=True, timeout=20, check=True
            )
            body = json.loads(result.stdout)
            job = get_json(f"{web.url}/v1/tts/jobs/{body['id']}")
            assert job["voice"] == "en_female" and job["format"] == "flac"
        assert_no_console_errors(console)
    finally:
        context.close()


def test_the_default_voice_follows_the_text(
    web: WebProcess, worker: Any, new_page: Callable[..., Any], console: Console
) -> None:
    """Left on Automatic, the form names no voice and the server reads each text in its own
    language, as every API does; the hint says which voice that will be."""
    page = new_page()
    page.goto(web.url)
    expect(page.locator("#conn")).to_have_attribute("data-state", "live")
    by_language = get_json(f"{web.url}/v1/voices")["default_by_language"]
    for text, language in ((ENGLISH, "en"), (CHINESE, "zh")):
        page.fill("#text", text)
        label = page.locator(f"#voice option[value={by_language[language]}]").text_content()
        expect(page.locator("#voice-hint")).to_have_text(f"Read by: {label}.")
        card = submit(page, text)
        expect(card).to_have_attribute("data-state", "succeeded", timeout=30_000)
        job = get_json(f"{web.url}/v1/tts/jobs/{card.get_attribute('data-job-id')}")
        assert job["voice"] == by_language[language]
        expect(card).to_contain_text(str(label))
    assert_no_console_errors(console)


def test_a_document_from_a_text_file(
    start_web: Callable[..., WebProcess],
    settings: Any,
    worker: Any,
    new_page: Callable[..., Any],
    console: Console,
    tmp_path: Any,
) -> None:
    """A book longer than a job, opened from a file: taken as a document (made in parts, in the
    format picked), heard, and kept whole."""
    web = start_web(settings.replace(max_text_chars=500))
    book = tmp_path / "book.txt"
    book.write_text(" ".join(f"This is sentence {n} of a short book." for n in range(40)))
    page = new_page()
    page.goto(web.url)
    expect(page.locator("#conn")).to_have_attribute("data-state", "live")
    page.select_option("#format", "mp3")
    page.set_input_files("#text-file", str(book))
    expect(page.locator("#text-msg")).to_have_text(
        re.compile(r"A document of 1,\d{3} characters.*its MP3 file")
    )
    page.uncheck("#live-play")
    page.click("#submit")
    expect(cards(page)).to_have_count(1)
    card = cards(page).first
    expect(card).to_have_attribute("data-state", "succeeded", timeout=60_000)
    job = get_json(f"{web.url}/v1/tts/jobs/{card.get_attribute('data-job-id')}")
    assert job["document"] is True and job["format"] == "mp3", job
    assert audio_duration(card) > 30
    assert_no_console_errors(console)
