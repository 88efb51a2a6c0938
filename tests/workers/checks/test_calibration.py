"""The recognizer against each of eSpeak NG's English voices, as a worker calibrates them the first
time each is heard: pocketsphinx hears the female voice; the male one it fails too often, so its
words go unheard (its signal is still checked)."""

from __future__ import annotations

import numpy as np

from core.queue.job import SynthesisRequest
from tests.workers.engines.helpers import espeak
from workers.checks import calibration
from workers.checks.checker import Checker
from workers.checks.recognizers.pocketsphinx import Pocketsphinx
from workers.engines.base import SAMPLE_RATE, Segment

SAID: list[str] = []


async def _say(voice: str) -> list[np.ndarray]:
    SAID.append(voice)
    engine = espeak()
    return [
        engine.synthesize([Segment("t", 0, text, SynthesisRequest(text=text, voice=voice))])[0]
        for text in calibration.SENTENCES
    ]


async def test_a_voice_the_recognizer_fails_goes_unheard() -> None:
    checker = Checker(Pocketsphinx(timeout_s=30))
    checker.calibration = calibration.Calibration(
        checker, {"en_male", "en_female"}, _say, SAMPLE_RATE
    )
    text = calibration.SENTENCES[0]
    male, female = (await _say("en_male"))[0], (await _say("en_female"))[0]
    SAID.clear()
    try:
        heard = await checker.check(female, SAMPLE_RATE, text, voice="en_female")
        assert heard.state == "passed"
        unheard = await checker.check(male, SAMPLE_RATE, text, voice="en_male")
        assert unheard.state == "unheard"
        assert "does not hear the voice 'en_male' reliably" in unheard.unheard
        again = await checker.check(male, SAMPLE_RATE, text, voice="en_male")
        assert again.unheard == unheard.unheard
        assert SAID == ["en_female", "en_male"]  # each voice calibrated once
        # Its signal is still checked.
        cut = await checker.check(male[: male.size // 5], SAMPLE_RATE, text, voice="en_male")
        assert cut.state == "failed" and cut.reasons == ["too_short"]
    finally:
        await checker.close()
