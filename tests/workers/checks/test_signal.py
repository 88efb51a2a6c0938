"""The cheap checks on a segment's samples: real eSpeak NG speech passes, each spoiled copy fails
with its own reason."""

from __future__ import annotations

import numpy as np
import pytest

from core.queue.job import SynthesisRequest
from tests.workers.engines.helpers import espeak
from workers.checks.faults import spoil
from workers.checks.signal import signal_faults
from workers.engines.base import SAMPLE_RATE, Segment

TEXT = "The quick brown fox jumps over the lazy dog near the river bank."


@pytest.fixture(scope="module")
def speech() -> np.ndarray:
    engine = espeak()
    request = SynthesisRequest(text=TEXT, voice="en_female")
    audio: np.ndarray = engine.synthesize([Segment("t", 0, TEXT, request)])[0]
    return audio


def test_real_speech_has_no_fault(speech: np.ndarray) -> None:
    assert signal_faults(speech, SAMPLE_RATE, TEXT) == []


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("short", "too_short"),
        ("runon", "too_long"),
        ("silence", "silence"),
        ("loop", "loop"),
        ("clip", "clipped"),
        ("nan", "not_finite"),
        ("quiet", "quiet"),
        ("noisy", "noisy"),
    ],
)
def test_each_fault_has_its_reason(speech: np.ndarray, kind: str, reason: str) -> None:
    assert reason in signal_faults(spoil(kind, speech, SAMPLE_RATE), SAMPLE_RATE, TEXT)


def test_a_segment_that_ran_to_its_budget_says_so(speech: np.ndarray) -> None:
    assert signal_faults(speech, SAMPLE_RATE, TEXT, truncated=True) == ["ran_to_budget"]


def test_speed_scales_what_the_text_should_take(speech: np.ndarray) -> None:
    """Read at half speed, the same text may take twice as long; at double speed, half."""
    slow = np.repeat(speech, 2)  # twice as long, as speed 0.5 makes it
    assert signal_faults(slow, SAMPLE_RATE, TEXT, speed=0.5) == []
    assert "too_short" in signal_faults(speech[: speech.size // 4], SAMPLE_RATE, TEXT, speed=0.5)


def test_noise_alone_and_silence_alone_fail(speech: np.ndarray) -> None:
    noise = np.random.default_rng(1).uniform(-0.3, 0.3, speech.size).astype(np.float32)
    assert "noisy" in signal_faults(noise, SAMPLE_RATE, TEXT)
    assert "quiet" in signal_faults(np.zeros_like(speech), SAMPLE_RATE, TEXT)
