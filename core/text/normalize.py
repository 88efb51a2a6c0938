"""Text normalization for ChatTTS: numbers, dates, money and symbols become words (zh and en).

ChatTTS silently drops every character outside CJK ideographs, Latin letters and `，。、,. `; this
module spells out what a person typed so that nothing is lost (the patterns and their readings
are in `normalize_rules.py`, number words in `normalize_numbers.py`). It does not import torch.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

from core.text.control_tokens import TEXT_TOKEN, TOKEN_SHAPE
from core.text.normalize_numbers import Lang
from core.text.normalize_rules import RULES, Rule

# ChatTTS's control tokens that a person may type on purpose (pauses, laughter, see
# control_tokens.py) are kept verbatim; any other token-shaped `[word]` (refused at submission)
# is dropped, never spoken as a word.
_TAG = TEXT_TOKEN
_TAG_SPLIT = re.compile(f"({TEXT_TOKEN.pattern})")
_CJK = re.compile(r"[\u4e00-\u9fff]")
_LATIN_WORD = re.compile(r"[A-Za-z]+")
# What ChatTTS's own normalizer keeps (its reject pattern is the complement of this set).
_DISALLOWED = re.compile(r"[^\u4e00-\u9fffA-Za-z，。、,. ]")
_SENTENCE_ENDS = frozenset("。！？!?；;\n")
_SPEAKABLE = re.compile(r"[\u4e00-\u9fffA-Za-z]")
_ACCENTED = re.compile(r"[\u00c0-\u024f]")  # Latin letters with accents (and a few symbols)
_SPACES = re.compile(r" {2,}")
_CJK_SPACE = re.compile(r"(?<=[\u4e00-\u9fff，。、]) | (?=[\u4e00-\u9fff，。、])")
# Around a number, this many characters decide whether it is read in Mandarin or in English.
_CONTEXT_CHARS = 24

# Symbols read aloud, by language. Order matters: multi-character symbols first.
_SYMBOLS: tuple[tuple[str, str, str], ...] = (
    ("&", " and ", "和"),
    ("+", " plus ", "加"),
    ("=", " equals ", "等于"),
    ("@", " at ", "艾特"),
    ("#", " number ", "井号"),
    ("×", " times ", "乘以"),
    ("÷", " divided by ", "除以"),
    ("<", " less than ", "小于"),
    (">", " greater than ", "大于"),
    ("°", " degrees ", "度"),
    ("/", " slash ", "斜杠"),
)
# Punctuation ChatTTS drops but that marks a pause: mapped to the pause marks it keeps (sentence
# ends to a full stop, clause marks and brackets to a comma); quotes become spaces, apostrophes go.
_PUNCT_ZH = str.maketrans(
    {
        **dict.fromkeys("!?….", "。"),
        **dict.fromkeys(";:—–~()【】《》「」『』・-,", "，"),
        **dict.fromkeys('"“”', " "),
        **dict.fromkeys("'‘’", ""),
    }
)
_PUNCT_EN = str.maketrans(
    {
        **dict.fromkeys("!?…", "."),
        **dict.fromkeys(";:—–~()", ","),
        **dict.fromkeys('"“”-_', " "),
        **dict.fromkeys("'‘’", ""),
    }
)


def normalize(text: str, language_hint: str = "zh", spell: bool = True) -> str:
    """Spell out numbers, dates, money and symbols; return what ChatTTS will speak.

    Each number is read in the language of the text around it (`language_hint` decides when the
    context has no letters, e.g. "123"). The result holds only characters ChatTTS keeps, plus its
    control tags; it is "" when nothing speakable remains, which callers reject. `spell=False`
    (a request's `"normalize": false`) leaves numbers and symbols unspelled: they are dropped,
    as ChatTTS's own normalizer drops them; punctuation still becomes the pauses ChatTTS keeps.
    """
    hint: Lang = "en" if language_hint.lower().startswith("en") else "zh"
    text = unicodedata.normalize("NFKC", text).replace("\u3007", "零")
    # Split at the tags (kept, at the odd places): only the text between them is normalized.
    pieces = _TAG_SPLIT.split(text)
    pieces[::2] = [_normalize_plain(plain, hint, spell) for plain in pieces[::2]]
    out = re.sub(r"\s+", " ", "".join(pieces))
    # Runs of pause marks ("，，", ", .") left by dropped symbols: keep the first one.
    out = re.sub(r"\s*([，。、,.])(?:\s*[，。、,.])*", r"\1", out).strip(" ,，")
    return out if _SPEAKABLE.search(_TAG.sub("", out)) else ""


def is_speakable(text: str, language_hint: str = "zh", spell: bool = True) -> bool:
    """True when `normalize` leaves something for ChatTTS to say."""
    return bool(normalize(text, language_hint, spell))


def _normalize_plain(text: str, hint: Lang, spell: bool = True) -> str:
    if not text:
        return text
    text = TOKEN_SHAPE.sub(" ", _strip_accents(text))
    if spell:
        for pattern, rule in RULES:
            text = _sub(pattern, text, hint, rule)
        text = _symbols(text, hint)
    lang = _language(text, 0, len(text), hint)
    text = text.translate(_PUNCT_ZH if lang == "zh" else _PUNCT_EN)
    # One space for each run that dropped characters leave: the pattern below then meets single
    # spaces only (on a long run, " +(?=...)" retried at each of its spaces costs its square).
    text = _SPACES.sub(" ", _DISALLOWED.sub(" ", text))
    # Spaces between CJK characters are noise; between Latin words they separate words.
    return _CJK_SPACE.sub("", text)


def _sub(pattern: re.Pattern[str], text: str, hint: Lang, rule: Rule) -> str:
    def replace(match: re.Match[str]) -> str:
        lang = _language(text, match.start(), match.end(), hint)
        words = rule(match, lang)
        return f" {words} " if lang == "en" else words

    return pattern.sub(replace, text)


def _language(text: str, start: int, end: int, hint: Lang) -> Lang:
    """Mandarin or English for text[start:end]: the nearest letters on both sides, if they agree,
    else the majority of letters around it (CJK characters against Latin words)."""
    left = _nearest_letter(reversed(text[max(0, start - _CONTEXT_CHARS) : start]))
    right = _nearest_letter(iter(text[end : end + _CONTEXT_CHARS]))
    if left == right and left is not None:
        return left
    if left is None or right is None:
        return left or right or hint
    window = text[max(0, start - _CONTEXT_CHARS) : end + _CONTEXT_CHARS]
    cjk = len(_CJK.findall(window))
    latin = len(_LATIN_WORD.findall(window))
    if cjk == latin:
        return hint
    return "zh" if cjk > latin else "en"


def _nearest_letter(chars: Iterator[str]) -> Lang | None:
    for ch in chars:
        if ch in _SENTENCE_ENDS:
            return None
        if "\u4e00" <= ch <= "\u9fff":
            return "zh"
        if ch.isascii() and ch.isalpha():
            return "en"
    return None


def _strip_accents(text: str) -> str:
    """café -> cafe: ChatTTS keeps only unaccented Latin letters."""
    if text.isascii():
        return text
    return _ACCENTED.sub(
        lambda m: "".join(
            c for c in unicodedata.normalize("NFD", m[0]) if not unicodedata.combining(c)
        ),
        text,
    )


def _symbols(text: str, hint: Lang) -> str:
    for symbol, en, zh in _SYMBOLS:
        if symbol not in text:
            continue
        parts = text.split(symbol)
        out = parts[0]
        for part in parts[1:]:
            lang = _language(out + part, len(out), len(out), hint)
            out += (en if lang == "en" else zh) + part
        text = out
    return text
