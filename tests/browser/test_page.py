"""The demo page in a real Chromium against a real web process, worker processes and Redis."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
import redis
import soundfile as sf
from playwright.sync_api import expect

from workers.keys import Keys
from workers.settings import Settings

from .conftest import Console, TcpProxy, WebProcess

pytestmark = pytest.mark.browser

ENGLISH = "Hello from the browser test. The quick brown fox jumps over the lazy dog."
CHINESE = "你好，欢迎使用在线语音合成服务。今天天气很好。"
# Long enough for several segments (the espeak engine cuts at about 200 characters).
LONG_ENGLISH = " ".join(
    f"This is sentence number {i} of a long text that the worker synthesizes in segments."
    for i in range(1, 25)
)


# ------------------------------------------------------------------------------------ helpers


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
    audio = card.locator("audio")
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


# ------------------------------------------------------------------------------------ tests


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
    # ... with a handful of requests, all to this origin: 1 HTML, 3 CSS, at most 10 modules (all
    # named in the HTML, so they load in parallel), the voice list and the event stream.
    kinds = [r.resource_type for r in requests]
    assert kinds.count("document") == 1 and kinds.count("stylesheet") == 3
    assert 1 <= kinds.count("script") <= 10
    assert len(requests) <= 16, [r.url for r in requests]
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


def test_cancel_queued_then_retry(
    web: WebProcess,
    start_worker: Callable[..., Any],
    new_page: Callable[..., Any],
    console: Console,
    shot: Callable[..., Any],
) -> None:
    page = open_page(new_page, web.url)
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
    live = retried.locator("[data-role=live]")
    expect(live).to_have_attribute("data-status", "playing", timeout=30_000)
    expect(live).to_be_visible()
    expect(retried).to_have_attribute("data-state", "succeeded", timeout=60_000)
    assert len(segment_requests) > 2, segment_requests
    assert all(
        f"/v1/tts/jobs/{retried.get_attribute('data-job-id')}/segments/" in u
        for u in segment_requests
    )
    live.locator("[data-action=stop-live]").click()
    expect(live).to_be_hidden()
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


def test_every_error_is_explained(
    settings: Settings,
    start_web: Callable[..., WebProcess],
    new_page: Callable[..., Any],
    console: Console,
    shot: Callable[..., Any],
) -> None:
    # One active job per client and no worker: the second submission is refused (429).
    web = start_web(settings.replace(max_active_per_client=1, max_text_chars=300))
    page = open_page(new_page, web.url)
    alert = page.locator("#form-error")

    # Too long: said before anything is sent, with by how much.
    page.fill("#text", "a" * 305)
    expect(page.locator("#char-count")).to_have_text("305 / 300")
    expect(page.locator("#text-msg")).to_have_text(re.compile(r"Too long by 5 characters"))
    expect(page.locator("#text")).to_have_attribute("aria-invalid", "true")
    page.click("#submit")
    expect(cards(page)).to_have_count(0)
    shot(page, "desktop-light-too-long")

    # Nothing to say.
    page.fill("#text", "   ")
    page.click("#submit")
    expect(page.locator("#text-msg")).to_have_text("Type some text first.")

    # A value the server refuses: its message, and the field it names gets the focus.
    page.fill("#text", "Hello there.")
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
        assert sorted(options) == sorted(v["name"] for v in voices)

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
    r = redis.Redis.from_url(settings.redis_url or "")
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
