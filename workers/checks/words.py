"""The words a segment should say and those a recognizer heard, made comparable (numbers spelled
as the normalizer speaks them), and how far apart they are: an error rate, and the longest run of
words that differ (which a whole-segment similarity hides)."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from core.text.control_tokens import TOKEN_SHAPE
from core.text.normalize import normalize
from core.text.normalize_numbers import en_year

_WORD = re.compile(r"[a-z']+|[\u3400-\u9fff]")
_CJK = re.compile(r"[\u3400-\u9fff]")
_LATIN = re.compile(r"[A-Za-z]")


def language_of(text: str) -> str:
    """ "zh" where the text holds Chinese characters, "en" where it holds Latin letters only,
    "" where it holds neither (nothing a recognizer could check)."""
    if _CJK.search(text):
        return "zh"
    return "en" if _LATIN.search(text) else ""


def words_of(text: str, language: str) -> list[str]:
    """`text` as comparable words: control tokens dropped, numbers and symbols spelled in
    `language`, lower case, punctuation gone; a Chinese character is a word."""
    spoken = normalize(TOKEN_SHAPE.sub(" ", text), language or "en")
    return _WORD.findall(spoken.lower())


# A number, with its currency sign, separators and percent: read as a whole.
_NUMBER = re.compile(r"[$£€]?\d[\d,.:]*\d%?|[$£€]?\d%?")
_YEAR = re.compile(r"1[1-9]\d\d|20\d\d")
_CURRENCIES = {"$": ("dollar", "dollars"), "£": ("pound", "pounds"), "€": ("euro", "euros")}
# English abbreviations every reader expands (the normalizer leaves them as letters).
_TITLES = {
    "dr": ["doctor"],
    "mr": ["mister"],
    "mrs": ["missus"],
    "ms": ["miz"],
    "prof": ["professor"],  # or "prof", as eSpeak NG says it
    "st": ["saint", "street"],
    "jr": ["junior"],
    "vs": ["versus"],
    "etc": ["etcetera"],
}

# Where a text may be read more than one way: each slot's readings (each a list of words).
Slot = list[list[str]]


def readings(text: str, language: str) -> list[Slot]:
    """`text` as slots of words, each with the readings a speaker may give it: a number as the
    normalizer spells it, without its "and"s, and a year as a year; an abbreviated title
    expanded. English only; other languages have one reading per word."""
    slots: list[Slot] = []
    position = 0
    for match in _NUMBER.finditer(text) if language == "en" else ():
        slots += _word_slots(text[position : match.start()], language)
        number = match.group(0)
        spelled = words_of(number, language)
        options = [spelled, [w for w in spelled if w != "and"]]
        if number[0] in _CURRENCIES:  # eSpeak NG: "dollar one hundred point four six"
            plain = words_of(number[1:], language)
            for name in _CURRENCIES[number[0]]:
                options += [[name, *plain], [*plain, name]]
        if _YEAR.fullmatch(number):
            options.append(_WORD.findall(en_year(number).lower().replace("-", " ")))
        slots.append([o for i, o in enumerate(options) if o and o not in options[:i]])
        position = match.end()
    slots += _word_slots(text[position:], language)
    return [slot for slot in slots if slot]


def _word_slots(text: str, language: str) -> list[Slot]:
    return [
        [[word], *([alt] for alt in _TITLES.get(word, []))] if language == "en" else [[word]]
        for word in words_of(text, language)
    ]


@dataclass(frozen=True)
class Comparison:
    """Expected words against heard ones."""

    error_rate: float  # words changed, left out or added, per expected word
    longest_run: int  # the most words in a row that differ
    # (expected, heard) of each place they differ, the longest first, a few at most.
    differing: list[tuple[str, str]] = field(default_factory=list)


def compare(expected: list[str], heard: list[str], keep: int = 3) -> Comparison:
    """How `heard` differs from `expected`. difflib's matching blocks (not a minimal edit
    distance: the stdlib's, and close enough to rank and flag runs)."""
    matcher = difflib.SequenceMatcher(None, expected, heard, autojunk=False)
    runs = [
        (max(i2 - i1, j2 - j1), " ".join(expected[i1:i2]), " ".join(heard[j1:j2]))
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        if tag != "equal"
    ]
    errors = sum(run for run, _, _ in runs)
    runs.sort(key=lambda r: -r[0])
    return Comparison(
        error_rate=errors / max(1, len(expected)),
        longest_run=runs[0][0] if runs else 0,
        differing=[(want, got) for _, want, got in runs[:keep]],
    )
