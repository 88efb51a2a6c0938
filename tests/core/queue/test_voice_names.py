"""Voices a name alone says: a voice per language read from its name and chosen for a text of
two languages, whether no voice, OpenAI's or Kokoro's name was given."""

from __future__ import annotations

import pytest

from core.queue.voice_names import (
    VoiceNameError,
    alias,
    canonical,
    is_derived,
    pair_of,
    voice_runs,
)
from core.queue.voices import default_voice

MIXED = "Home Assistant says hello. 客厅的灯已经打开。 The heating is on."


def test_a_voice_per_language_is_read_in_either_order() -> None:
    assert pair_of("en_male|zh_female") == ("en_male", "zh_female")
    assert canonical(" zh_female_2 | en_male_2 ", "hi") == "en_male_2|zh_female_2"
    assert is_derived("en_female|zh_male") and pair_of("en_female") is None


@pytest.mark.parametrize(
    "name", ["en_female|en_male", "zh_male|zh_female", "en_female|seed_5", "en_female|zh_male|x"]
)
def test_a_voice_per_language_needs_one_english_and_one_mandarin(name: str) -> None:
    with pytest.raises(VoiceNameError, match="an English and a Mandarin built-in voice"):
        canonical(name, "hi")
    assert not is_derived(name)


def test_a_text_of_two_languages_gets_a_voice_per_language() -> None:
    assert default_voice(MIXED) == "en_female|zh_female"
    assert alias("onyx", MIXED) == "en_male_2|zh_male_2"
    assert alias("bf_emma", MIXED) == "en_female_2|zh_female"  # Kokoro's British voices
    assert alias("zm_yunxi", MIXED) == "en_male|zh_male"
    # One language: one voice, as before; a Kokoro name reads the text's language.
    assert default_voice("Hello there. How are you?") == "en_female"
    assert alias("alloy", "你好，世界。今天很好。") == "zh_female"
    assert alias("af_bella", "你好，世界。") == "zh_female"
    assert alias("zf_xiaoxiao", "Hello.") == "en_female"
    assert default_voice("我们用 ChatTTS 合成语音。") == "zh_female"  # a word inside a sentence


def test_each_run_of_sentences_is_read_by_its_languages_voice() -> None:
    runs = voice_runs("en_female|zh_female", MIXED)
    assert [(voice, MIXED[a:b].strip()) for voice, a, b in runs] == [
        ("en_female", "Home Assistant says hello."),
        ("zh_female", "客厅的灯已经打开。"),
        ("en_female", "The heating is on."),
    ]
    assert voice_runs("en_female", MIXED) == [("en_female", 0, len(MIXED))]
