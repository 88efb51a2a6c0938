"""Whether the recognizer hears each of an engine's own voices: known sentences, spoken by each
voice at the worker's start and heard. A recognizer that fails a voice's correct speech would
fail its good segments too; that voice's words are then unheard, and the worker says so."""

from __future__ import annotations

import numpy as np

from workers.checks.checker import Checker

# English sentences every English voice should pass (varied: numbers, a question, a long clause).
SENTENCES = (
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "Please call me back before Friday, or send me a short message.",
    "Our meeting starts at half past ten in the small room upstairs.",
    "She bought three books and a bottle of water at the station.",
    "It was a bright cold day in April, and the clocks were striking.",
    "Turn left at the second light, then keep going straight ahead.",
    "Thank you very much for all of your help today.",
    "Could you tell me where the nearest bus stop is?",
)
# Correct sentences a voice may fail before the recognizer is said not to hear it: one of eight
# (eSpeak NG's English female voice fails about one sentence in a hundred, its male voice one in
# three: bench/checks.py).
ALLOWED_FAILURES = 1


async def calibrate(checker: Checker, voice: str, audio: list[np.ndarray], rate: int) -> str:
    """Hear `voice` saying SENTENCES (`audio`, in order); why its words go unheard ("" when the
    recognizer hears it), noted on `checker`."""
    failed = 0
    for text, samples in zip(SENTENCES, audio, strict=True):
        verdict = await checker.check(samples, rate, text)
        failed += verdict.state == "failed" and "words" in verdict.reasons
    if failed <= ALLOWED_FAILURES:
        return ""
    name = checker.recognizer.name if checker.recognizer else "the recognizer"
    why = (
        f"{name} does not hear the voice {voice!r} reliably: it failed {failed} of "
        f"{len(SENTENCES)} correct sentences when the worker started"
    )
    checker.unheard_voices[voice] = why
    return why
