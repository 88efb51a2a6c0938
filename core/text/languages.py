"""A text's languages: which of Mandarin and English each sentence is in, and what the voices
cannot read (other scripts, other languages' accented letters), told rather than hidden."""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from core.text.control_tokens import TOKEN_SHAPE
from core.text.sentences import sentence_ends

# Unicode scripts by name prefix (unicodedata.name), as a reader would call them.
OTHER_SCRIPTS = (
    ("HIRAGANA", "Japanese kana"),
    ("KATAKANA", "Japanese kana"),
    ("HANGUL", "Korean"),
    ("CYRILLIC", "Cyrillic"),
    ("ARABIC", "Arabic"),
    ("HEBREW", "Hebrew"),
    ("DEVANAGARI", "Devanagari"),
    ("THAI", "Thai"),
    ("GREEK", "Greek"),
)
# Accented Latin letters past this share of the letters: another language written in Latin
# (French, German, Spanish …), which the English voices read with English spelling.
ACCENTED_SHARE = 0.02
SCANNED_CHARS = 4_000  # a notice, not a census: the start of a long document tells


# A letter that is neither ASCII, a Chinese character nor a full-width form (punctuation of any
# script is not one): where the search finds none (nearly every text), no closer look is needed.
_ELSE = re.compile(r"[^\W\d_\x00-\x7f\u4e00-\u9fff\uff00-\uffef]")


def unreadable(text: str) -> list[str]:
    """What the voices will not read as written (empty: nothing): each a short phrase."""
    if _ELSE.search(text, 0, SCANNED_CHARS) is None:
        return []
    found: dict[str, None] = {}
    letters = accented = 0
    for ch in text[:SCANNED_CHARS]:
        if not ch.isalpha() or ch.isascii() or "\u4e00" <= ch <= "\u9fff":  # read as written
            letters += ch.isalpha()
            continue
        letters += 1
        name = unicodedata.name(ch, "")
        if name.startswith("LATIN"):
            accented += 1
            continue
        for prefix, script in OTHER_SCRIPTS:
            if name.startswith(prefix):
                found[script] = None
                break
    if letters and accented / letters > ACCENTED_SHARE:
        found["letters of a language other than English (é, ü, ñ …)"] = None
    return list(found)


def notice(text: str) -> str | None:
    """One sentence for a client, or None when the voices read all of it."""
    what = unreadable(text)
    if not what:
        return None
    return (
        f"the text holds {', '.join(what)}; the voices speak Mandarin and English, and read the "
        "rest as best they can (or skip it): the audio may not say it"
    )


def mostly_mandarin(text: str) -> bool:
    """True when Chinese characters are at least a quarter of the letters (one character is
    about a word, and a Western word has several letters)."""
    cjk = other = 0
    for ch in text:
        if "\u4e00" <= ch <= "\u9fff" or "\u3400" <= ch <= "\u4dbf":
            cjk += 1
        elif ch.isalpha():
            other += 1
    return cjk > 0 and 3 * cjk >= other


def language_runs(text: str) -> list[tuple[str, int, int]]:
    """The text cut where its sentences change language: ("zh" or "en", start, end), in order,
    covering it. A sentence with no letters (a number, a mark, a control token) stays with the
    run before it (the first, when it opens the text); a text with no letters is one English run."""
    runs: list[list[Any]] = []
    start = 0
    for end in sentence_ends(text):
        sentence = TOKEN_SHAPE.sub("", text[start:end])
        if any(ch.isalpha() for ch in sentence):
            language = "zh" if mostly_mandarin(sentence) else "en"
            if runs and runs[-1][0] != language:
                runs.append([language, start, end])
            elif runs:
                runs[-1][2] = end
            else:
                runs.append([language, 0, end])
        elif runs:
            runs[-1][2] = end
        start = end
    if not runs:
        return [("en", 0, len(text))]
    runs[-1][2] = len(text)
    return [(language, a, b) for language, a, b in runs]
