"""What a recognizer gives back for a segment (`Heard`) and what one is (`Recognizer`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from workers.checks.words import Slot


class Unheard(Exception):
    """The recognizer could not hear the segment (down, too slow, a word it cannot say)."""


@dataclass(frozen=True)
class Heard:
    """A transcript's words (`words`); or the text's words as the audio follows them (`words`,
    the readings it took), with `doubtful` saying which it did not confirm, `aligned` False when
    the audio could not be aligned to the text at all, and `extra_s` the seconds of speech the
    alignment put in no word (a repeat, babble)."""

    words: list[str] | None = None
    doubtful: list[bool] | None = None
    aligned: bool = True
    extra_s: float = 0.0


class Recognizer(Protocol):
    name: str
    # A run of this many differing words fails a segment, and so does a larger share of its
    # words than this: each recognizer's own, measured (bench/checks.py).
    fail_run: int
    max_error_rate: float
    # Speech in no word past this many seconds fails a segment (a sentence or phrase said again).
    max_extra_s: float
    # Its model is small enough to hear some voices poorly: a worker hears its engine's own
    # voices through it at the start (checks/calibration.py).
    calibrated: bool

    def covers(self, language: str) -> bool:
        """It can hear speech in `language` ("en", "zh")."""

    async def hear(
        self, samples: np.ndarray, rate: int, expected: list[Slot], language: str
    ) -> Heard:
        """Hear `samples` (float32 mono at `rate`) that should say `expected` (its words, each
        slot a choice of readings: words.readings); raises Unheard."""

    async def close(self) -> None: ...
