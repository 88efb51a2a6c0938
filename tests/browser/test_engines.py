"""The demo page in Blink, Gecko and WebKit: the same scenarios in each engine, against a real web
process and real worker processes (eSpeak NG), with streamed playback checked on the page's own
AudioContext timeline."""

from __future__ import annotations

import io
import itertools
import json
import time
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
import soundfile as sf
import srt

from tests.browser.conftest import ARTIFACTS, TcpProxy
from tests.browser.engines import (
    WEBKIT_CRASH,
    ChromiumDriver,
    Driver,
    FirefoxDriver,
    WebKitDriver,
    wait_for,
)
from tests.browser.helpers import CHINESE, LONG_ENGLISH, get_json
from tests.web.webproc import WebProcess

pytestmark = [pytest.mark.browser, pytest.mark.flaky(reruns=1, only_rerun=[WEBKIT_CRASH])]

# Streamed chunks must join on the AudioContext clock: each starts where the previous one ends.
CONTIGUOUS_S = 0.005
# Four segments of eSpeak speech (it cuts at about 200 characters): several chunks, quickly.
STREAMED = LONG_ENGLISH[:700]
LIVE = "return document.getElementById('conn').dataset.state === 'live';"
XSS = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script> & “quotes”'


@pytest.fixture(autouse=True)
def live_driver(driver: Driver) -> None:
    """Each scenario starts in a live session (a new one after a WebKit crash)."""
    if isinstance(driver, WebKitDriver):
        driver.revive()


# ------------------------------------------------------------------------------------ the page


def open_page(driver: Driver, url: str) -> None:
    driver.goto(url)
    # Only a page whose every module ran turns the pill "live" (its event stream is open).
    wait_for(
        driver, "return document.getElementById('conn').dataset.state === 'live';", what="live"
    )
    wait_for(driver, "return document.querySelectorAll('#voice option').length > 1;", what="voices")


def card_count(driver: Driver) -> int:
    return int(driver.run("return document.querySelectorAll('#job-list > li').length;"))


def submit(driver: Driver, text: str, voice: str = "en_female", fmt: str = "wav") -> str:
    before = card_count(driver)
    driver.type("#text", text)
    driver.run(
        """for (const [id, value] of [["voice", args[0]], ["format", args[1]]]) {
             const el = document.getElementById(id);
             el.value = value;
             el.dispatchEvent(new Event("change", { bubbles: true }));
           }""",
        voice,
        fmt,
    )
    driver.click("#submit")
    wait_for(
        driver,
        "return document.querySelectorAll('#job-list > li').length === args[0];",
        before + 1,
        what="the new card",
    )
    return str(driver.run("return document.querySelector('#job-list > li').dataset.jobId;"))


def state_of(driver: Driver, job_id: str) -> str:
    return str(
        driver.run(
            "const li = document.querySelector(`#job-list > li[data-job-id='${args[0]}']`);"
            "return li ? li.dataset.state : null;",
            job_id,
        )
    )


def wait_state(driver: Driver, job_id: str, state: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while (now := state_of(driver, job_id)) != state:
        assert time.monotonic() < deadline, f"{driver.engine}: {job_id} is {now}, not {state}"
        time.sleep(0.1)


def events_of(driver: Driver, job_id: str, timeout: float = 30) -> list[str]:
    """The card's event timeline (what live events, not polling, told the page), once it holds
    the job's end and has stopped growing (a resumed stream may still be replaying)."""
    body = """const li = document.querySelector(`#job-list > li[data-job-id='${args[0]}']`);
              const details = li.querySelector("details.job-details");
              details.open = false;  // reopened: drawn afresh
              await new Promise((resolve) => setTimeout(resolve, 50));
              details.open = true;
              await new Promise((resolve) => setTimeout(resolve, 50));
              const items = [...li.querySelectorAll("[data-role=timeline] li")];
              return items.map((i) => i.dataset.type);"""
    deadline = time.monotonic() + timeout
    last: list[str] = []
    while True:
        events = list(driver.run(body, job_id))
        if (events == last and "succeeded" in events) or time.monotonic() > deadline:
            return events
        last = events
        time.sleep(0.3)


def audio_control_duration(driver: Driver, job_id: str) -> float:
    return float(
        driver.run(
            """const a = document.querySelector(`#job-list > li[data-job-id='${args[0]}'] audio`);
               if (!(a.readyState >= 1 && a.duration > 0)) {
                 if (a.preload === "none") a.load();
                 await new Promise((resolve, reject) => {
                   a.addEventListener("loadedmetadata", resolve, { once: true });
                   const fail = () => reject(new Error("audio error"));
                   a.addEventListener("error", fail, { once: true });
                 });
               }
               return a.duration;""",
            job_id,
        )
    )


def assert_contiguous(driver: Driver, job_id: str, duration_s: float) -> list[dict[str, Any]]:
    """The chunks the page scheduled join end to start on the AudioContext clock, and make up
    the whole job: no gap, no overlap, no byte lost or played twice."""
    timeline: list[dict[str, Any]] = driver.run(
        "return window.chatttsOnline.liveTimeline(args[0]);", job_id
    )
    assert len(timeline) >= 2, (driver.engine, timeline)
    for before, after in itertools.pairwise(timeline):
        if after["late"]:
            continue  # arrived after its turn: a silence, allowed (and counted below)
        seam = after["at"] - (before["at"] + before["duration"])
        assert abs(seam) <= CONTIGUOUS_S, (driver.engine, seam, timeline)
    total = sum(entry["duration"] for entry in timeline)
    assert abs(total - duration_s) < 0.01, (driver.engine, total, duration_s)
    return timeline


def assert_no_errors(driver: Driver, *, cut: bool = False) -> None:
    """No error on the page. After a cut network, Chromium logs the requests it broke
    (net::ERR_...); nothing else may appear."""
    errors = [e for e in driver.errors() if not (cut and "net::ERR_" in e)]
    assert errors == [], (driver.engine, errors)


def shot(driver: Driver, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    driver.screenshot(ARTIFACTS / f"{driver.engine}-{name}.png")


# ------------------------------------------------------------------------------------ scenarios


def test_speak_stream_listen_download(
    driver: Driver, web: WebProcess, worker: Any, make_proxy: Callable[[int], TcpProxy]
) -> None:
    """A Mandarin and an English job reach succeeded through live events; the English one plays
    as it is made, chunk after chunk, gapless; the final files play and download and decode."""
    # eSpeak makes the whole job in well under a second: over loopback a browser may then be
    # handed the whole stream in one read (WebKit was), and there would be nothing to join.
    # A link of sixteen times real time makes it arrive as it would from a real server.
    proxy = make_proxy(web.port)
    open_page(driver, proxy.url)
    proxy.rate = 16 * 48_000  # bytes/s
    chinese = submit(driver, CHINESE, voice="zh_female")
    english = submit(driver, STREAMED, voice="en_female")
    for job_id in (chinese, english):
        wait_state(driver, job_id, "succeeded")
        events = events_of(driver, job_id)
        assert events[0] == "queued" and {"running", "succeeded"} <= set(events), events
        assert audio_control_duration(driver, job_id) > 0.5

    job = get_json(f"{web.url}/v1/tts/jobs/{english}")
    assert (job["segments_total"] or 0) >= 3 and job["chunks_done"] >= 3, job
    wait_for(  # the stream is still arriving over the slow link when the job has ended
        driver,
        """const t = window.chatttsOnline.liveTimeline(args[0]);
           return t.reduce((sum, e) => sum + e.duration, 0) >= args[1] - 0.01;""",
        english,
        job["duration_s"],
        what="the whole stream scheduled",
    )
    assert_contiguous(driver, english, job["duration_s"])
    # Running, once the sound device is open (Firefox takes a second or two on PulseAudio).
    wait_for(driver, "return window.chatttsOnline.audioState() === 'running';", timeout=10)

    # The download link: a file name, and bytes this engine decodes (and so does libsndfile).
    link = driver.run(
        """const li = document.querySelector(`#job-list > li[data-job-id='${args[0]}']`);
           const a = li.querySelector("[data-role=download]");
           const bytes = await (await fetch(a.href)).arrayBuffer();
           const ctx = new OfflineAudioContext(1, 24000, 24000);
           const audio = await new Promise((resolve, reject) => {
             const p = ctx.decodeAudioData(bytes, resolve, reject);
             if (p && p.catch) p.catch(reject);
           });
           return { href: a.href, name: a.getAttribute("download"), duration: audio.duration };""",
        chinese,
    )
    assert link["name"].endswith(".wav"), link
    assert link["duration"] > 0.5, link
    with urllib.request.urlopen(link["href"], timeout=10) as response:
        samples, rate = sf.read(io.BytesIO(response.read()))
    assert rate == 24_000 and abs(len(samples) / rate - link["duration"]) < 0.05
    # The subtitles link beside it: the job's SRT file, the cues the API serves.
    subtitles = driver.run(
        """const li = document.querySelector(`#job-list > li[data-job-id='${args[0]}']`);
           const a = li.querySelector("[data-role=subtitles]");
           return { hidden: a.hidden, name: a.getAttribute("download"),
                    text: await (await fetch(a.href)).text() };""",
        english,
    )
    assert not subtitles["hidden"] and subtitles["name"].endswith(".srt"), subtitles
    cues = list(srt.parse(subtitles["text"]))
    served = get_json(f"{web.url}/v1/tts/jobs/{english}/subtitles?format=json")["cues"]
    assert [c.content for c in cues] == [c["text"] for c in served], subtitles
    shot(driver, "succeeded")
    assert_no_errors(driver)


def test_cancel_and_inert_markup(
    driver: Driver, web: WebProcess, start_worker: Callable[..., Any]
) -> None:
    """No worker: the job waits; cancel ends it. Markup in the text stays text."""
    open_page(driver, web.url)
    job_id = submit(driver, XSS)
    wait_state(driver, job_id, "queued")
    driver.click(f"#job-list > li[data-job-id='{job_id}'] [data-action=cancel]")
    wait_state(driver, job_id, "cancelled")
    assert get_json(f"{web.url}/v1/tts/jobs/{job_id}")["state"] == "cancelled"
    shown = driver.run(
        """const li = document.querySelector(`#job-list > li[data-job-id='${args[0]}']`);
           const text = li.querySelector("[data-role=text]");
           return { text: text.textContent, elements: text.querySelectorAll("*").length,
                    xss: window.__xss ?? null };""",
        job_id,
    )
    assert shown == {"text": XSS, "elements": 0, "xss": None}, shown
    assert_no_errors(driver)


def test_history_and_a_cut_connection(
    driver: Driver,
    web: WebProcess,
    start_worker: Callable[..., Any],
    make_proxy: Callable[[int], TcpProxy],
) -> None:
    """The network drops while the job runs: the event stream resumes with no event lost or
    repeated; on a slow network the chunk stream is cut mid-transfer and resumes at the byte it
    reached, gapless. The history survives a reload."""
    proxy = make_proxy(web.port)
    open_page(driver, proxy.url)
    job_id = submit(driver, LONG_ENGLISH, voice="en_male")  # queued: no worker yet
    wait_state(driver, job_id, "queued")
    proxy.refusing = True
    proxy.cut()
    wait_for(driver, "return document.getElementById('conn').dataset.state !== 'live';")
    worker = start_worker()  # the whole job runs while the page is cut off
    deadline = time.monotonic() + 60
    while (job := get_json(f"{web.url}/v1/tts/jobs/{job_id}"))["state"] != "succeeded":
        assert time.monotonic() < deadline, job
        time.sleep(0.1)
    worker.stop()

    proxy.rate = 8 * 48_000  # bytes/s: eight times real time, over a slow link
    proxy.refusing = False
    wait_for(driver, LIVE)
    wait_for(driver, "return window.chatttsOnline.liveTimeline(args[0]).length >= 2;", job_id)
    proxy.cut()  # mid-transfer: seconds of audio are still to come
    received = driver.run("return window.chatttsOnline.liveTimeline(args[0]).length;", job_id)
    proxy.rate = None
    wait_state(driver, job_id, "succeeded")
    wait_for(
        driver,
        """const t = window.chatttsOnline.liveTimeline(args[0]);
           return Math.abs(t.reduce((s, e) => s + e.duration, 0) - args[1]) < 0.01;""",
        job_id,
        job["duration_s"],
        what="the rest of the chunks",
    )
    assert received < len(assert_contiguous(driver, job_id, job["duration_s"]))
    resumed = [h for h in proxy.heads if h.startswith(f"GET /v1/tts/jobs/{job_id}/stream?offset=")]
    assert resumed, proxy.heads
    events = events_of(driver, job_id)
    assert events[0] == "queued" and events[-1] == "succeeded", " ".join(events)
    assert events.count("running") == 1 and events.count("succeeded") == 1, events
    assert events.count("progress") == job["segments_total"], events  # none lost, none twice

    driver.reload()
    wait_for(driver, LIVE)
    assert card_count(driver) == 1
    assert state_of(driver, job_id) == "succeeded"
    assert audio_control_duration(driver, job_id) > 5
    assert_no_errors(driver, cut=True)


def test_autoplay_without_a_gesture(driver: Driver, web: WebProcess, worker: Any) -> None:
    """A job started with no user gesture: the engine refuses to start audio (WebKit by its own
    rule, as Safari; Chromium and Firefox by the policy set here), the card asks for a tap, and
    plays after it. WebKit gives no autoplay verdict to read: the page waits out its grace."""
    if isinstance(driver, FirefoxDriver):
        driver.set_pref("media.autoplay.default", 5)  # block all audio until a gesture
    if isinstance(driver, ChromiumDriver):
        driver.new_context()  # Chromium lets a site play that was clicked in this tab before
    open_page(driver, web.url)
    try:
        # Text and click from a script, no user gesture (typing would be one).
        driver.run_without_gesture(
            "const text = document.getElementById('text');"
            f"text.value = {json.dumps(STREAMED)};"
            "text.dispatchEvent(new Event('input', { bubbles: true }));"
            "document.getElementById('submit').click();"
        )
        wait_for(driver, "return Boolean(document.querySelector('#job-list > li'));")
        job_id = str(driver.run("return document.querySelector('#job-list > li').dataset.jobId;"))
        play = f"#job-list > li[data-job-id='{job_id}'] [data-action=play-live]"
        shown = "const b = document.querySelector(args[0]); return Boolean(b && !b.hidden);"
        wait_for(driver, shown, play)
        assert driver.run("return window.chatttsOnline.audioState();") == "suspended"
        shot(driver, "autoplay-refused")
        driver.click(play)  # a real gesture
        wait_for(driver, "return window.chatttsOnline.audioState() === 'running';")
        wait_state(driver, job_id, "succeeded")
        duration = get_json(f"{web.url}/v1/tts/jobs/{job_id}")["duration_s"]
        wait_for(
            driver,
            """const t = window.chatttsOnline.liveTimeline(args[0]);
               return Math.abs(t.reduce((s, e) => s + e.duration, 0) - args[1]) < 0.01;""",
            job_id,
            duration,
            what="the whole job scheduled",
        )
        assert not driver.run(shown, play)
        assert_no_errors(driver)
    finally:
        if isinstance(driver, FirefoxDriver):
            driver.set_pref("media.autoplay.default", 0)
