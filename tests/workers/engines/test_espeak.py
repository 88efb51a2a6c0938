"""The eSpeak NG engine in-process: every voice speaks, the same text the same samples, speed
changes duration, 24 kHz out, and ChatTTS's break tokens are pauses of their length while its
other tokens are never spoken."""

from __future__ import annotations

import numpy as np
import pytest

from core.queue.job import SynthesisRequest
from core.text.control_tokens import PAUSE_MS
from tests.workers.engines.helpers import espeak, split
from workers.engines.base import SAMPLE_RATE, Segment
from workers.engines.espeak import speech_text

ENGINE = espeak()


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


def test_the_same_text_and_voice_are_the_same_samples_whatever_came_before() -> None:
    text = "The quick brown fox jumps over the lazy dog, seven times."
    first = speak(text, voice="en_female")
    speak("你好，世界。", voice="zh_male_2")
    speak("Something else entirely.", voice="en_male", speed=1.5)
    again = speak(text, voice="en_female")
    assert first.size == again.size
    assert np.array_equal(first, again)


def test_speed_changes_duration() -> None:
    slow = speak("The quick brown fox jumps over the lazy dog.", voice="en_male", speed=0.5)
    fast = speak("The quick brown fox jumps over the lazy dog.", voice="en_male", speed=2.0)
    assert slow.size > 1.6 * fast.size


def test_split_keeps_every_sentence() -> None:
    text = " ".join(f"Sentence {i} is here." for i in range(60))
    segments = split(ENGINE, text, SynthesisRequest(text=text))
    assert len(segments) > 1 and all(len(s) <= 200 for s in segments)
    assert " ".join(segments) == text


# -- ChatTTS's control tokens: break tokens are pauses, the rest are silent ---------------------


def _ms(samples: np.ndarray) -> float:
    return samples.size / SAMPLE_RATE * 1000


def _longest_silence_ms(samples: np.ndarray) -> float:
    silent = np.concatenate([[False], samples == 0.0, [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(silent))
    runs = edges[1::2] - edges[::2]
    return float(runs.max()) / SAMPLE_RATE * 1000 if runs.size else 0.0


@pytest.mark.parametrize(
    ("voice", "plain", "tagged"),
    [
        ("en_male", "One. Two.", "One. {} Two."),
        ("en_female", "One two three.", "One two {} three."),
        ("en_male", "Hello there.", "Hello there. {}"),
        ("zh_female", "你好世界。欢迎使用。", "你好{}世界。欢迎使用。"),
    ],
)
@pytest.mark.parametrize("token", ["[uv_break]", "[v_break]", "[lbreak]", "[llbreak]", "[break_3]"])
def test_a_break_token_is_a_pause_of_its_length(
    voice: str, plain: str, tagged: str, token: str
) -> None:
    without = speak(plain, voice=voice)
    with_pause = speak(tagged.format(token), voice=voice)
    assert _ms(with_pause) - _ms(without) == pytest.approx(PAUSE_MS[token], abs=25)
    # The pause is digital silence on top of eSpeak's own, never a stretch of speech.
    assert _longest_silence_ms(with_pause) >= PAUSE_MS[token]


def test_pauses_add_up_and_do_not_depend_on_speed() -> None:
    plain = speak("One. Two.", voice="en_male", speed=2.0)
    paused = speak("One. [lbreak][llbreak] Two. [uv_break]", voice="en_male", speed=2.0)
    assert _ms(paused) - _ms(plain) == pytest.approx(600 + 1000 + 150, abs=25)


@pytest.mark.parametrize("token", ["[laugh]", "[oral_2]", "[laugh_1]", "[music]", "[break_0]"])
def test_other_tokens_add_no_speech(token: str) -> None:
    plain = speak("Hello there, my friend.", voice="en_male")
    tagged = speak(f"Hello {token} there, my friend.", voice="en_male")
    spoken = speak(f"Hello {token[1:-1].replace('_', ' ')} there, my friend.", voice="en_male")
    assert _ms(tagged) == pytest.approx(_ms(plain), abs=15)
    assert _ms(spoken) > _ms(plain) + 150  # what reading the token aloud would have cost


def test_speech_text_replaces_tokens_and_places_pauses() -> None:
    assert speech_text("One. [lbreak] Two [laugh] three.[break_2]") == (
        "One.   Two   three. ",
        [(5, 600), (19, 200)],
    )
    assert speech_text("No tokens here.") == ("No tokens here.", [])


def test_split_keeps_tokens_with_their_words() -> None:
    text = "One two three. [lbreak] " + " ".join(f"Sentence {i} is here." for i in range(40))
    segments = split(ENGINE, text, SynthesisRequest(text=text))
    assert len(segments) > 1 and segments[0].startswith("One two three. [lbreak] Sentence")
