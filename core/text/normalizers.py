"""The text normalizers an engine may read text through, by the name its capabilities give (its
heartbeat's `normalizer`): whether one leaves anything to say, and what to tell a client whose
text it would reduce to nothing."""

from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Normalizer:
    """One normalizer: `module`'s `is_speakable(text, language_hint, spell)`, imported when first
    asked (the number libraries take a while), and its two refusals: for text read with numbers
    and symbols spelled out, and for text read as it is (the request's `normalize`: false)."""

    module: str
    nothing_left: str
    nothing_left_as_written: str

    def speakable(self, text: str, language_hint: str, spell: bool) -> bool:
        is_speakable = importlib.import_module(self.module).is_speakable
        return bool(is_speakable(text, language_hint, spell=spell))

    def refusal(self, spell: bool) -> str:
        return self.nothing_left if spell else self.nothing_left_as_written


NORMALIZERS = {
    "chattts": Normalizer(
        "core.text.normalize",
        "'text' has nothing ChatTTS can speak: it reads Chinese and English (letters, numbers, "
        "dates, money and common symbols are spelled out); other scripts, emoji and lone "
        "symbols are dropped",
        "'text' has nothing ChatTTS can speak with 'normalize': false: it reads Chinese "
        "characters and English letters only; digits, symbols, other scripts and emoji are "
        "dropped (send 'normalize': true to have numbers and symbols spelled out)",
    ),
}


def normalizer_named(name: str | None) -> Normalizer | None:
    """The normalizer an engine names (None: it names none, or one this service does not know,
    so what it would drop cannot be told here)."""
    return NORMALIZERS.get(name) if name else None
