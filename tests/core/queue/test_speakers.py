"""The one rule of which voices an engine speaks, as the web tier and a worker both apply it."""

from __future__ import annotations

import pytest

from core.queue.speakers import unspeakable

ESPEAK = {"registered_voices": False, "blends": False}
CHATTTS = {"registered_voices": True, "blends": True}


@pytest.mark.parametrize("voice", ["en_female", "seed_2222", "2222", "zh_male"])
def test_what_a_name_says_is_spoken_by_every_engine(voice: str) -> None:
    assert unspeakable(voice, "espeak", **ESPEAK, who="this worker runs") is None


def test_a_registered_voice_needs_an_engine_that_speaks_them() -> None:
    refusal = unspeakable("my_narrator", "espeak", **ESPEAK, who="the live workers run")
    assert refusal is not None and refusal.code == "voice_needs_chattts"
    assert "'my_narrator'" in refusal.message and "the live workers run espeak" in refusal.message
    assert unspeakable("my_narrator", "chattts", **CHATTTS, who="this worker runs") is None


def test_a_blend_needs_an_engine_that_mixes_voices() -> None:
    blend = "en_female(2)+seed_2222(1)"
    refusal = unspeakable(blend, "espeak", **ESPEAK, who="this worker runs")
    assert refusal is not None and refusal.code == "voice_blend_unsupported"
    assert "cannot mix voices" in refusal.message and "this worker runs espeak" in refusal.message
    assert unspeakable(blend, "chattts", **CHATTTS, who="this worker runs") is None
