"""Whether the recognizer hears each of an engine's own voices: the first time a voice is heard,
it says known sentences through the engine, and they are heard. A recognizer that fails a voice's
correct speech would fail its good segments too; that voice's words are then unheard, and the
worker says so."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import numpy as np

from workers.checks.checker import Checker

log = logging.getLogger("chattts_online.worker")
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

# Speaks SENTENCES in a voice through the engine: their audio, in order.
Speak = Callable[[str], Awaitable[list[np.ndarray]]]


async def calibrate(checker: Checker, voice: str, audio: list[np.ndarray], rate: int) -> str:
    """Hear `voice` saying SENTENCES (`audio`, in order); why its words go unheard ("" when the
    recognizer hears it)."""
    failed = 0
    for text, samples in zip(SENTENCES, audio, strict=True):
        verdict = await checker.check(samples, rate, text)
        failed += verdict.state == "failed" and "words" in verdict.reasons
    if failed <= ALLOWED_FAILURES:
        return ""
    name = checker.recognizer.name if checker.recognizer else "the recognizer"
    return (
        f"{name} does not hear the voice {voice!r} reliably: it failed {failed} of "
        f"{len(SENTENCES)} correct sentences"
    )


class Calibration:
    """The voices of `voices` calibrated once each, the first time one is heard (the others,
    registered or of another language, are not)."""

    def __init__(self, checker: Checker, voices: set[str], speak: Speak, rate: int) -> None:
        self.checker, self.voices, self.speak, self.rate = checker, voices, speak, rate
        self._found: dict[str, asyncio.Task[str]] = {}

    async def unheard(self, voice: str) -> str:
        """Why `voice`'s words go unheard ("" when the recognizer hears it)."""
        if voice not in self.voices:
            return ""
        found = self._found.get(voice)
        if found is None:
            found = self._found[voice] = asyncio.create_task(self._calibrate(voice))
        return await asyncio.shield(found)

    async def _calibrate(self, voice: str) -> str:
        try:
            why = await calibrate(self.checker, voice, await self.speak(voice), self.rate)
        except Exception as exc:  # an engine that cannot say them: the voice is heard as is
            log.warning("cannot calibrate the voice %r: %s", voice, exc)
            return ""
        if why:
            log.warning("%s; its words go unheard", why)
        return why
