"""Faults injected into the audio an engine makes, for tests and benchmarks through the whole
service: CHATTTS_FAULT_AUDIO=kind[:attempts] spoils the first `attempts` (1) attempts of every
segment, whichever the engine."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

FAULT_AUDIO_ENV = "CHATTTS_FAULT_AUDIO"
KINDS = ("short", "runon", "silence", "loop", "words", "clip", "nan", "quiet", "noisy")
# What the engine is given instead of the text, for "words".
OTHER_WORDS = "Seven purple elephants were dancing quietly behind the old library."


@dataclass(frozen=True)
class AudioFaults:
    kind: str
    attempts: int = 1

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> AudioFaults | None:
        raw = (os.environ if env is None else env).get(FAULT_AUDIO_ENV, "").strip()
        if not raw:
            return None
        kind, _, attempts = raw.partition(":")
        if kind not in KINDS:
            raise ValueError(f"{FAULT_AUDIO_ENV}={raw!r}: the kinds are {', '.join(KINDS)}")
        return cls(kind, int(attempts or 1))

    def text(self, text: str, attempt: int) -> str:
        """What the engine is asked to say for attempt `attempt` of a segment of `text`."""
        return OTHER_WORDS if self.kind == "words" and attempt < self.attempts else text

    def audio(self, samples: np.ndarray, rate: int, attempt: int) -> np.ndarray:
        """Attempt `attempt`'s audio, spoiled as `kind` says (while attempts remain)."""
        if attempt >= self.attempts or not samples.size:
            return samples
        return spoil(self.kind, samples, rate)


def spoil(kind: str, samples: np.ndarray, rate: int) -> np.ndarray:
    """`samples` with the fault `kind` in them (the kinds of KINDS but "words")."""
    middle = samples.size // 2
    if kind == "short":
        return samples[: max(1, samples.size // 5)]
    if kind == "runon":  # on past the text, into a murmur, until a budget would end it
        rng = np.random.default_rng(0)
        murmur = 0.05 * rng.standard_normal(int(samples.size * 2 + 8 * rate)).astype(np.float32)
        return np.concatenate([samples, murmur])
    if kind == "silence":
        return np.concatenate([samples[:middle], np.zeros(3 * rate, np.float32), samples[middle:]])
    if kind == "loop":
        piece = samples[middle : middle + rate // 2]
        return np.concatenate([samples[:middle], *([piece] * 5), samples[middle:]])
    if kind == "clip":
        clipped: np.ndarray = np.clip(samples * 20, -1.0, 1.0).astype(np.float32)
        return clipped
    if kind == "quiet":  # 50 dB down
        quiet: np.ndarray = (samples * 10 ** (-50 / 20)).astype(np.float32)
        return quiet
    if kind == "noisy":  # under white noise of the speech's own power (0 dB)
        rng = np.random.default_rng(0)
        power = float(np.sqrt(np.mean(samples.astype(np.float64) ** 2)))
        noise = power * rng.standard_normal(samples.size)
        noisy: np.ndarray = (samples + noise).astype(np.float32)
        return noisy
    if kind == "nan":
        spoiled = samples.copy()
        spoiled[middle : middle + 100] = np.nan
        return spoiled
    return samples
