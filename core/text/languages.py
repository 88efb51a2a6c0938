"""What in a text the voices cannot read: the engines speak Mandarin and English, so other scripts
(Japanese kana, Korean, Cyrillic …) and other languages' accented letters are told, not hidden."""

from __future__ import annotations

import re
import unicodedata

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
