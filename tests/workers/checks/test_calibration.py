"""The recognizer against each of eSpeak NG's English voices, as a worker calibrates at its start:
pocketsphinx hears the female voice; the male one it fails too often, so its words go unheard."""

from __future__ import annotations

import numpy as np

from core.queue.job import SynthesisRequest
from tests.workers.engines.helpers import espeak
from workers.checks import calibration
from workers.checks.checker import Checker
from workers.checks.recognizers.pocketsphinx import Pocketsphinx
from workers.engines.base import SAMPLE_RATE, Segment


def _said(voice: str) -> list[np.ndarray]:
    engine = espeak()
    return [
        engine.synthesize([Segment("t", 0, text, SynthesisRequest(text=text, voice=voice))])[0]
        for text in calibration.SENTENCES
    ]


async def test_a_voice_the_recognizer_fails_goes_unheard() -> None:
    checker = Checker(Pocketsphinx(timeout_s=30))
    try:
        assert (
            await calibration.calibrate(checker, "en_female", _said("en_female"), SAMPLE_RATE) == ""
        )
        why = await calibration.calibrate(checker, "en_male", _said("en_male"), SAMPLE_RATE)
        assert "does not hear the voice 'en_male'" in why
        text = calibration.SENTENCES[0]
        male, female = _said("en_male")[0], _said("en_female")[0]
        unheard = await checker.check(male, SAMPLE_RATE, text, voice="en_male")
        assert unheard.state == "unheard" and unheard.unheard == why
        assert (await checker.check(female, SAMPLE_RATE, text, voice="en_female")).passed
        # Its signal is still checked.
        cut = await checker.check(male[: male.size // 5], SAMPLE_RATE, text, voice="en_male")
        assert cut.state == "failed" and cut.reasons == ["too_short"]
    finally:
        await checker.close()
