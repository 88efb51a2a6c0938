"""The demo page's Live mode in Blink, Gecko and WebKit: a text typed into a live session piece by
piece, its audio played as it comes, each word lit as it is spoken, and Stop (barge-in), against a
real web process and a real espeak worker."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.browser.conftest import ARTIFACTS
from tests.browser.engines import WEBKIT_CRASH, Driver, WebKitDriver, wait_for
from tests.web.webproc import WebProcess

pytestmark = [pytest.mark.browser, pytest.mark.flaky(reruns=1, only_rerun=[WEBKIT_CRASH])]

SHORT = "Hello from live mode. Every word lights up as it is spoken."
LONG = " ".join(
    f"Sentence number {i} keeps the speaker busy for a good while longer." for i in range(1, 9)
)
STAGE = "const s = document.getElementById('live-stage').dataset;"


@pytest.fixture(autouse=True)
def live_driver(driver: Driver) -> None:
    if isinstance(driver, WebKitDriver):
        driver.revive()


def stage(driver: Driver) -> dict[str, Any]:
    found: dict[str, Any] = driver.run(
        STAGE
        + """const spoken = document.getElementById('live-spoken');
           return { state: s.state, played: Number(s.playedS), lit: Number(s.litWords),
                    words: [...spoken.querySelectorAll('span')].map((w) => w.textContent),
                    current: spoken.querySelector('.lit')?.textContent ?? null,
                    speak: document.getElementById('live-speak').disabled,
                    stop: document.getElementById('live-stop').disabled };"""
    )
    return found


def speak(driver: Driver, text: str, voice: str = "en_female", rate: int = 100) -> None:
    driver.type("#live-text", text)
    driver.run(
        """const voice = document.getElementById('live-voice');
           voice.value = args[0];
           const rate = document.getElementById('live-rate');
           rate.value = String(args[1]);
           rate.dispatchEvent(new Event('input', { bubbles: true }));""",
        voice,
        rate,
    )
    driver.click("#live-speak")


def test_live_mode_speaks_lights_words_and_stops(
    driver: Driver, web: WebProcess, worker: Any
) -> None:
    driver.goto(web.url)
    wait_for(driver, "return document.getElementById('conn').dataset.state === 'live';")
    wait_for(driver, "return document.querySelectorAll('#voice option').length > 1;")
    driver.click("#mode-live")
    shown = driver.run(
        """return { jobs: document.getElementById('tts-form').hidden,
                    live: document.getElementById('live-form').hidden,
                    voices: [...document.querySelectorAll('#live-voice option')]
                      .map((o) => o.value),
                    rate: document.getElementById('live-rate-out').textContent };"""
    )
    assert shown["jobs"] and not shown["live"], shown
    assert "en_female" in shown["voices"] and shown["rate"] == "30 tokens/s", shown

    # A short text to the end: every word lit in order, the audio played through.
    speak(driver, SHORT)
    wait_for(driver, STAGE + "return s.state === 'speaking';", what="speaking")
    wait_for(driver, STAGE + "return Number(s.litWords) >= 2;", what="words lit")
    lit_while_playing = stage(driver)
    assert lit_while_playing["current"] is not None and lit_while_playing["stop"] is False
    wait_for(driver, STAGE + "return s.state === 'done';", what="done")
    done = stage(driver)
    assert done["words"] == SHORT.split(), done
    assert done["current"] is None and 2.0 < done["played"] < 15.0, done
    assert done["stop"] and not done["speak"], done

    # A long one stopped while it plays: silence at once, the rest never spoken.
    speak(driver, LONG)
    wait_for(driver, STAGE + "return Number(s.playedS) > 1.5;", what="playing")
    driver.click("#live-stop")
    wait_for(driver, STAGE + "return s.state === 'stopped';", what="stopped", timeout=5)
    stopped = stage(driver)
    time.sleep(0.5)
    assert stage(driver) == stopped  # nothing more lit, nothing more played
    assert 1.5 < stopped["played"] < 8.0, stopped
    assert 2 < len(stopped["words"]) < len(LONG.split()), stopped
    assert stopped["words"] == LONG.split()[: len(stopped["words"])], stopped
    assert stopped["stop"] and not stopped["speak"], stopped
    assert driver.run("return document.getElementById('live-error').hidden;")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    driver.screenshot(ARTIFACTS / f"{driver.engine}-live-mode.png")
    assert driver.errors() == [], (driver.engine, driver.errors())
