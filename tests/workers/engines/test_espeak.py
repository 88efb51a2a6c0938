"""The eSpeak NG engine in-process: every voice speaks, speed changes duration, 24 kHz out."""

from __future__ import annotations

import numpy as np

from workers.engines.base import SAMPLE_RATE, Segment
from workers.engines.espeak import EspeakEngine
from workers.infra.settings import Settings
from workers.queue.job import SynthesisRequest

ENGINE = EspeakEngine(Settings())
ENGINE.load()


def speak(text: str, **params: object) -> np.ndarray:
    request = SynthesisRequest(text=text, **params)  # type: ignore[arg-type]
    return ENGINE.synthesize([Segment("t", 0, text, request)])[0]


def test_every_voice_speaks() -> None:
    for voice in ENGINE.voices():
        text = "你好，欢迎使用。" if voice.language.startswith("zh") else "Hello and welcome."
        samples = speak(text, voice=voice.name)
        assert samples.dtype == np.float32
        assert samples.size > SAMPLE_RATE * 0.4, voice.name
        assert np.abs(samples).max() > 0.05, voice.name


def test_speed_changes_duration() -> None:
    slow = speak("The quick brown fox jumps over the lazy dog.", voice="en_male", speed=0.5)
    fast = speak("The quick brown fox jumps over the lazy dog.", voice="en_male", speed=2.0)
    assert slow.size > 1.6 * fast.size


def test_split_keeps_every_sentence() -> None:
    text = " ".join(f"Sentence {i} is here." for i in range(60))
    segments = ENGINE.split(text, SynthesisRequest(text=text))
    assert len(segments) > 1 and all(len(s) <= 200 for s in segments)
    assert " ".join(segments) == text
