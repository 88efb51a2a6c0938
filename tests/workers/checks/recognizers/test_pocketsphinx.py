"""pocketsphinx's alignment of real eSpeak NG speech: correct speech passes, speech the text does
not account for (a sentence said twice) fails as extra speech, and words a partial path never
reached count as doubtful, never as heard."""

from __future__ import annotations

from collections.abc import AsyncIterator

import numpy as np
import pytest

from core.queue.job import SynthesisRequest
from tests.workers.engines.helpers import espeak
from workers.checks.checker import Checker
from workers.checks.recognizers.pocketsphinx import Pocketsphinx, _unreached
from workers.engines.base import SAMPLE_RATE, Segment

TEXT = "Please call Robert back before Thursday, because the weather was lovely."
ENGINE = espeak()


def speak(text: str) -> np.ndarray:
    request = SynthesisRequest(text=text, voice="en_female")
    audio: np.ndarray = ENGINE.synthesize([Segment("t", 0, text, request)])[0]
    return audio


@pytest.fixture
async def checker() -> AsyncIterator[Checker]:
    checker = Checker(Pocketsphinx(timeout_s=30))
    yield checker
    await checker.close()


async def test_correct_speech_passes_with_no_extra_speech(checker: Checker) -> None:
    verdict = await checker.check(speak(TEXT), SAMPLE_RATE, TEXT)
    assert verdict.state == "passed", verdict.public()


async def test_speech_the_text_does_not_account_for_fails(checker: Checker) -> None:
    """The sentence said twice: its words all heard, and as much speech again in none of them
    (bench.checks measures phrases said again, and the rest of the class, over a corpus)."""
    verdict = await checker.check(speak(f"{TEXT} {TEXT}"), SAMPLE_RATE, TEXT)
    assert verdict.state == "failed" and verdict.reasons == ["extra_speech"], verdict.public()


def test_the_words_a_partial_path_never_reached() -> None:
    grammar = [[["at"]], [["two"]], [["twelve"], ["twelve", "noon"]], [["o'clock"]]]
    assert _unreached(grammar, ["at", "two", "twelve", "noon", "o'clock"]) == []
    assert _unreached(grammar, ["at", "two", "twelve"]) == ["o'clock"]
    assert _unreached(grammar, ["at"]) == ["two", "twelve", "o'clock"]
