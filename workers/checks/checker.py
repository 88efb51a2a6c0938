"""A segment heard before it counts as done: its signal checked, then its words by the
recognizer where one covers its language; a verdict either way, never a silent pass."""

from __future__ import annotations

import asyncio
import importlib.util
import logging
from typing import Protocol

import numpy as np

from core.infra.settings import Settings
from workers.checks.recognizers.base import Heard, Recognizer, Unheard
from workers.checks.signal import signal_faults
from workers.checks.verdict import Verdict
from workers.checks.words import Comparison, compare, language_of, readings, words_of

log = logging.getLogger("chattts_online.worker")
# Below this many words, a share of differing words says too little: runs decide alone.
RATE_MIN_WORDS = 4


class VoiceCalibration(Protocol):
    async def unheard(self, voice: str) -> str:
        """Why `voice`'s words go unheard ("" when the recognizer hears it)."""


def make_recognizer(settings: Settings) -> Recognizer | None:
    """The recognizer CHATTTS_RECOGNIZER names: "auto" (pocketsphinx where it is installed),
    "none", "pocketsphinx", or the URL of a transcription server."""
    checks = settings.checks
    choice = checks.recognizer.strip()
    if choice.startswith(("http://", "https://")):
        from workers.checks.recognizers.transcription import Transcription

        return Transcription(
            choice, checks.recognizer_model, checks.recognizer_timeout_s, checks.recognizer_key
        )
    if choice == "none" or (choice == "auto" and importlib.util.find_spec("pocketsphinx") is None):
        return None
    from workers.checks.recognizers.pocketsphinx import Pocketsphinx

    return Pocketsphinx(checks.recognizer_timeout_s, checks.recognizer_processes)


class Checker:
    def __init__(self, recognizer: Recognizer | None, max_pending: int = 64) -> None:
        """`max_pending`: checks waiting for the recognizer beyond this are unheard at once (a
        recognizer slower than the engine costs verdicts, never memory or the engine's time)."""
        self.recognizer = recognizer
        self.max_pending = max_pending
        self.pending = 0
        # Which of the engine's own voices the recognizer hears (calibration.py), when known.
        self.calibration: VoiceCalibration | None = None

    async def start(self) -> None:
        start = getattr(self.recognizer, "start", None)
        if start is not None:
            await start()

    async def close(self) -> None:
        if self.recognizer is not None:
            await self.recognizer.close()

    async def check(
        self,
        samples: np.ndarray,
        rate: int,
        text: str,
        speed: float = 1.0,
        truncated: bool = False,
        voice: str = "",
    ) -> Verdict:
        """The verdict on `samples`, which should say `text` at `speed` in `voice`."""
        faults = await asyncio.to_thread(signal_faults, samples, rate, text, speed, truncated)
        if faults:
            return Verdict("failed", faults)
        language = language_of(text)
        recognizer = self.recognizer
        if recognizer is None:
            return Verdict("unheard", unheard="no recognizer is configured")
        why = await self.calibration.unheard(voice) if self.calibration and voice else ""
        if why:
            return Verdict("unheard", unheard=why)
        if not language or not recognizer.covers(language):
            return Verdict("unheard", unheard=f"{recognizer.name} does not hear this language")
        expected = readings(text, language)
        if not expected:
            return Verdict("unheard", unheard="no words to hear")
        if self.pending >= self.max_pending:
            return Verdict("unheard", unheard=f"{recognizer.name} is behind")
        self.pending += 1
        try:
            heard = await recognizer.hear(samples, rate, expected, language)
        except Unheard as exc:
            return Verdict("unheard", unheard=str(exc))
        finally:
            self.pending -= 1
        return judge(recognizer, text, language, heard)


def judge(recognizer: Recognizer, text: str, language: str, heard: Heard) -> Verdict:
    """Passed or failed on the words: a run of differing words or too large a share of them."""
    if heard.doubtful is None:  # a transcript, against the text read as the normalizer reads it
        expected = words_of(text, language)
        comparison = compare(expected, heard.words or [])
    else:  # the text's words, as the audio followed them
        expected = heard.words or []
        comparison = _doubts(expected, heard.doubtful, heard.aligned)
    bad = not heard.aligned or comparison.longest_run >= recognizer.fail_run
    if len(expected) >= RATE_MIN_WORDS and comparison.error_rate > recognizer.max_error_rate:
        bad = True
    reasons = ["words"] if bad else []
    if heard.extra_s > recognizer.max_extra_s:
        reasons.append("extra_speech")
    return Verdict("failed" if reasons else "passed", reasons, recognizer.name, comparison)


def _doubts(expected: list[str], doubtful: list[bool], aligned: bool) -> Comparison:
    """An alignment's doubtful words as a comparison (what was heard there is not known: "?")."""
    runs: list[list[str]] = []
    previous = False
    for word, doubt in zip(expected, doubtful, strict=False):
        if doubt:
            if not previous:
                runs.append([])
            runs[-1].append(word)
        previous = doubt
    if not aligned:
        runs = [expected]
    runs.sort(key=len, reverse=True)
    return Comparison(
        error_rate=sum(map(len, runs)) / max(1, len(expected)),
        longest_run=len(runs[0]) if runs else 0,
        differing=[(" ".join(run), "?") for run in runs[:3]],
    )
