"""The normalizers an engine may name: looked up by name, asked whether text is speakable."""

from __future__ import annotations

from core.text.normalizers import NORMALIZERS, normalizer_named


def test_an_engine_names_its_normalizer() -> None:
    chattts = normalizer_named("chattts")
    assert chattts is NORMALIZERS["chattts"]
    assert normalizer_named(None) is None and normalizer_named("kokoro-g2p") is None


def test_a_normalizer_tells_what_it_would_leave_to_say() -> None:
    chattts = normalizer_named("chattts")
    assert chattts is not None
    assert chattts.speakable("I bought 3 apples.", "en", spell=True)
    assert chattts.speakable("42", "en", spell=True)  # spelled out: forty-two
    assert not chattts.speakable("42", "en", spell=False)  # digits dropped as written
    assert not chattts.speakable("😀 🎉", "en", spell=True)
    assert "'normalize': true" in chattts.refusal(spell=False)
    assert "'normalize'" not in chattts.refusal(spell=True)
