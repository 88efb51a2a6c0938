"""Text normalization for ChatTTS: numbers, dates, money and symbols become words (zh and en).

ChatTTS silently drops every character outside CJK ideographs, Latin letters and `，。、,. `; this
module spells out what a person typed so that nothing is lost. It does not import torch.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterator
from typing import Literal

Lang = Literal["zh", "en"]

# ChatTTS's control tags that a person may type on purpose (pauses, laughter); kept verbatim.
_TAG = re.compile(r"\[(?:uv_break|v_break|lbreak|laugh|laugh_[0-2]|break_[0-7]|oral_[0-9])\]")
_CJK = re.compile(r"[\u4e00-\u9fff]")
_LATIN_WORD = re.compile(r"[A-Za-z]+")
# What ChatTTS's own normalizer keeps (its reject pattern is the complement of this set).
_DISALLOWED = re.compile(r"[^\u4e00-\u9fffA-Za-z，。、,. ]")
_SENTENCE_ENDS = frozenset("。！？!?；;\n")
_SPEAKABLE = re.compile(r"[\u4e00-\u9fffA-Za-z]")
# Around a number, this many characters decide whether it is read in Mandarin or in English.
_CONTEXT_CHARS = 24

_NUM = r"\d+(?:,\d{3})*(?:\.\d+)?"
# A minus sign, unless a Latin word or number precedes it ("COVID-19" is not negative).
_SIGN = r"(?P<sign>(?<![A-Za-z0-9-])-)?"
_CURRENCY = re.compile(
    rf"{_SIGN}(?P<sym>[$€£¥])\s?(?P<num>{_NUM})\s?(?P<scale>[KkMmBb](?![A-Za-z])|thousand|"
    rf"million|billion|trillion|万|亿)?(?:元)?"
)
_PERCENT = re.compile(rf"{_SIGN}(?P<num>{_NUM})\s?(?P<unit>%|‰)")
# Digits are bounded by lookarounds, not \b: in "在2024年" the CJK character is a word character.
_ISO_DATE = re.compile(r"(?<!\d)(?P<y>\d{4})[-/.](?P<m>\d{1,2})[-/.](?P<d>\d{1,2})(?!\d)")
_SLASH_DATE = re.compile(r"(?<!\d)(?P<a>\d{1,2})/(?P<b>\d{1,2})/(?P<y>\d{4})(?!\d)")
_TIME = re.compile(
    r"(?<!\d)(?P<h>[01]?\d|2[0-3]):(?P<m>[0-5]\d)(?::(?P<s>[0-5]\d))?(?!\d)"
    r"(?:\s?(?P<ampm>[AaPp])\.?[Mm]\.?(?![A-Za-z]))?"
)
_ORDINAL_EN = re.compile(r"(?<!\d)(?P<num>\d+)(?P<suf>st|nd|rd|th)(?![A-Za-z])", re.IGNORECASE)
# "3-5" and "3 ~ 5" are ranges; "5 - 3" (spaced hyphen) is left to be read as written.
_RANGE = re.compile(rf"(?P<a>{_NUM})(?:[-–—]|\s?~\s?)(?P<b>{_NUM})(?![\d-])")
_TEMPERATURE = re.compile(
    rf"{_SIGN}(?P<num>{_NUM})\s?(?:°\s?(?P<scale>[CF])?(?![A-Za-z])|(?P<sym>[℃℉]))"
)
# A minus sign only where no word precedes it: "COVID-19" is not negative.
_NUMBER = re.compile(rf"(?<![\d.])(?P<sign>(?<![A-Za-z0-9-])-(?=\d))?(?P<num>{_NUM})")
_YEAR_WORDS_EN = re.compile(
    r"(?:\b(?:in|since|by|from|until|till|before|after|of|year|circa|around)\s+)$", re.IGNORECASE
)

_MONTHS_EN = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
# Money: the unit's words per currency symbol, (singular, plural, minor singular, minor plural).
_MONEY_EN = {
    "$": ("dollar", "dollars", "cent", "cents"),
    "€": ("euro", "euros", "cent", "cents"),
    "£": ("pound", "pounds", "penny", "pence"),
    "¥": ("yuan", "yuan", "fen", "fen"),
}
_MONEY_ZH = {"$": "美元", "€": "欧元", "£": "英镑", "¥": "元"}
_SCALE_EN = {"k": "thousand", "m": "million", "b": "billion"}
_SCALE_ZH = {
    "k": "千",
    "m": "百万",
    "b": "十亿",
    "thousand": "千",
    "million": "百万",
    "billion": "十亿",
    "trillion": "万亿",
}
# Mandarin says 两, not 二, for a lone 2 before a measure word.
_MEASURE_WORDS = set("个只本位次天件条张种名辆台家岁年分秒点倍场遍块斤颗双")
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
# Units spelled out only right after a number ("5 kg"), never on their own.
_UNITS = {
    "km/h": ("kilometers per hour", "公里每小时"),
    "km": ("kilometers", "公里"),
    "kg": ("kilograms", "千克"),
    "cm": ("centimeters", "厘米"),
    "mm": ("millimeters", "毫米"),
    "mg": ("milligrams", "毫克"),
    "ml": ("milliliters", "毫升"),
    "GB": ("gigabytes", "G B"),
    "MB": ("megabytes", "M B"),
    "TB": ("terabytes", "T B"),
    "GHz": ("gigahertz", "吉赫兹"),
    "MHz": ("megahertz", "兆赫兹"),
}
_UNIT_AFTER_NUMBER = re.compile(
    rf"(?P<num>{_NUM})\s?(?P<unit>{'|'.join(sorted(_UNITS, key=len, reverse=True))})(?![A-Za-z])"
)
# Punctuation ChatTTS drops but that marks a pause: mapped to the pause marks it keeps.
_PUNCT_ZH = str.maketrans(
    {
        "!": "。",
        "?": "。",
        ";": "，",
        ":": "，",
        "…": "。",
        "—": "，",
        "–": "，",
        "~": "，",
        "(": "，",
        ")": "，",
        "【": "，",
        "】": "，",
        "《": "，",
        "》": "，",
        "「": "，",
        "」": "，",
        "『": "，",
        "』": "，",
        "・": "，",
        "-": "，",
        ",": "，",
        ".": "。",
        '"': " ",
        "“": " ",
        "”": " ",
        "'": "",
        "‘": "",
        "’": "",
    }
)
_PUNCT_EN = str.maketrans(
    {
        "!": ".",
        "?": ".",
        ";": ",",
        ":": ",",
        "…": ".",
        "—": ",",
        "–": ",",
        "~": ",",
        "(": ",",
        ")": ",",
        "-": " ",
        '"': " ",
        "“": " ",
        "”": " ",
        "'": "",
        "‘": "",
        "’": "",
        "_": " ",
    }
)


def normalize(text: str, language_hint: str = "zh") -> str:
    """Spell out numbers, dates, money and symbols; return what ChatTTS will speak.

    Each number is read in the language of the text around it (`language_hint` decides when the
    context has no letters, e.g. "123"). The result holds only characters ChatTTS keeps, plus its
    control tags; it is "" when nothing speakable remains, which callers reject.
    """
    hint: Lang = "en" if language_hint.lower().startswith("en") else "zh"
    text = unicodedata.normalize("NFKC", text).replace("\u3007", "零")
    pieces: list[str] = []
    pos = 0
    for tag in _TAG.finditer(text):
        pieces.append(_normalize_plain(text[pos : tag.start()], hint))
        pieces.append(tag.group(0))
        pos = tag.end()
    pieces.append(_normalize_plain(text[pos:], hint))
    out = re.sub(r"\s+", " ", "".join(pieces))
    # Runs of pause marks ("，，", ", .") left by dropped symbols: keep the first one.
    out = re.sub(r"\s*([，。、,.])(?:\s*[，。、,.])*", r"\1", out).strip(" ,，")
    return out if _SPEAKABLE.search(_TAG.sub("", out)) else ""


def is_speakable(text: str, language_hint: str = "zh") -> bool:
    """True when `normalize` leaves something for ChatTTS to say."""
    return bool(normalize(text, language_hint))


def _normalize_plain(text: str, hint: Lang) -> str:
    if not text:
        return text
    text = _strip_accents(text)
    for pattern, rule in _RULES:
        text = _sub(pattern, text, hint, rule)
    text = _symbols(text, hint)
    lang = _language(text, 0, len(text), hint)
    text = text.translate(_PUNCT_ZH if lang == "zh" else _PUNCT_EN)
    text = _DISALLOWED.sub(" ", text)
    # Spaces between CJK characters are noise; between Latin words they separate words.
    return re.sub(r"(?<=[\u4e00-\u9fff，。、]) +| +(?=[\u4e00-\u9fff，。、])", "", text)


Rule = Callable[["re.Match[str]", Lang], str]


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
    out = []
    for ch in text:
        if "\u00c0" <= ch <= "\u024f":
            ch = "".join(
                c for c in unicodedata.normalize("NFD", ch) if not unicodedata.combining(c)
            )
        out.append(ch)
    return "".join(out)


# --- numbers -------------------------------------------------------------------------------------


def _plain(num: str) -> str:
    return num.replace(",", "")


def _num2words(value: int, to: str = "cardinal") -> str:
    """num2words (imported on first use: the web tier may never need it), hyphens as spaces."""
    from num2words import num2words  # type: ignore[import-untyped,import-not-found,unused-ignore]

    return _tidy_en(str(num2words(value, to=to)))


def _en_words(value: str | int) -> str:
    return _num2words(int(value))


def _tidy_en(words: str) -> str:
    # "thirty-four" -> "thirty four": ChatTTS turns hyphens and commas into pauses.
    return words.replace("-", " ").replace(",", "")


def en_number(num: str, sign: str | None = None) -> str:
    """English words for a numeral such as "1,234.50" (digits after the point one by one)."""
    plain = _plain(num)
    whole, _, frac = plain.partition(".")
    words = _en_words(whole)
    if frac:
        words += " point " + " ".join(_en_words(d) for d in frac)
    return ("minus " if sign else "") + words


def zh_number(num: str, sign: str | None = None) -> str:
    """Mandarin for a decimal numeral, e.g. "1,234.5" -> 一千二百三十四点五."""
    import cn2an  # type: ignore[import-untyped,import-not-found,unused-ignore]

    plain = _plain(num)
    try:
        words = str(cn2an.an2cn(plain))
    except (ValueError, KeyError):
        words = _zh_digits(plain)
    return ("负" if sign else "") + words


def _zh_digits(digits: str) -> str:
    return "".join("零一二三四五六七八九"[int(d)] if d.isdigit() else "点" for d in digits)


def _en_digits(digits: str) -> str:
    return " ".join(_en_words(d) for d in digits if d.isdigit())


def _number(m: re.Match[str], lang: Lang) -> str:
    num, sign = m.group("num"), m.group("sign")
    plain = _plain(num)
    # Identifiers (phone numbers, codes, leading zeros) are read digit by digit.
    if (
        "," not in num
        and "." not in num
        and (len(plain) >= 11 or (len(plain) > 1 and plain[0] == "0"))
    ):
        return _zh_digits(plain) if lang == "zh" else _en_digits(plain)
    if lang == "zh":
        rest = m.string[m.end() : m.end() + 1]
        if len(plain) == 4 and rest == "年":
            return _zh_digits(plain)
        if plain == "2" and not sign and rest in _MEASURE_WORDS:
            return "两"
        return zh_number(num, sign)
    if (
        "," not in num
        and "." not in num
        and not sign
        and len(plain) == 4
        and 1100 <= int(plain) <= 2099
        and _YEAR_WORDS_EN.search(m.string[: m.start()])
    ):
        return _en_year(plain)
    return en_number(num, sign)


def _en_year(year: str) -> str:
    return _num2words(int(year), to="year")


def _currency(m: re.Match[str], lang: Lang) -> str:
    sym, num, sign = m.group("sym"), m.group("num"), m.group("sign")
    scale = (m.group("scale") or "").lower()
    whole, _, frac = _plain(num).partition(".")
    if lang == "zh":
        unit = _MONEY_ZH[sym]
        if scale:
            return zh_number(num, sign) + _SCALE_ZH.get(scale, scale) + unit
        cents = frac[:2].ljust(2, "0")
        out = zh_number(whole, sign) + unit
        if cents[0] != "0":
            out += _zh_digits(cents[0]) + "角"
        if cents[1] != "0":
            out += ("零" if cents[0] == "0" else "") + _zh_digits(cents[1]) + "分"
        return out
    one, many, minor_one, minor_many = _MONEY_EN[sym]
    prefix = "minus " if sign else ""
    if scale:
        return f"{prefix}{en_number(num)} {_SCALE_EN.get(scale, scale)} {many}"
    words = f"{prefix}{_en_words(whole)} {one if whole == '1' else many}"
    minor = int(frac[:2].ljust(2, "0")) if frac else 0
    if minor:
        words += f" and {_en_words(minor)} {minor_one if minor == 1 else minor_many}"
    return words


def _percent(m: re.Match[str], lang: Lang) -> str:
    per_mille = m.group("unit") == "‰"
    if lang == "zh":
        return ("千分之" if per_mille else "百分之") + zh_number(m.group("num"), m.group("sign"))
    return en_number(m.group("num"), m.group("sign")) + (" per mille" if per_mille else " percent")


def _date(y: str, month: int, day: int, lang: Lang) -> str | None:
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return None
    if lang == "zh":
        return f"{_zh_digits(y)}年{zh_number(str(month))}月{zh_number(str(day))}日"
    day_words = _num2words(day, to="ordinal")
    return f"{_MONTHS_EN[month - 1]} {day_words} {_en_year(y)}"


def _iso_date(m: re.Match[str], lang: Lang) -> str:
    out = _date(m.group("y"), int(m.group("m")), int(m.group("d")), lang)
    return out if out is not None else m.group(0).replace("/", " ").replace("-", " ")


def _slash_date(m: re.Match[str], lang: Lang) -> str:
    a, b = int(m.group("a")), int(m.group("b"))
    # Month first (US) unless the first field cannot be a month; Mandarin text writes y/m/d.
    month, day = (b, a) if a > 12 else (a, b)
    out = _date(m.group("y"), month, day, lang)
    return out if out is not None else m.group(0).replace("/", " ")


def _time(m: re.Match[str], lang: Lang) -> str:
    h, mi, s, ampm = int(m.group("h")), int(m.group("m")), m.group("s"), m.group("ampm")
    if lang == "zh":
        prefix = {"a": "上午", "p": "下午"}.get((ampm or "").lower(), "")
        out = prefix + zh_number(str(h)) + "点"
        if mi == 0 and not s:
            return out + "整"
        out += ("零" if mi < 10 else "") + zh_number(str(mi)) + "分"
        return out + (zh_number(str(int(s))) + "秒" if s else "")
    if mi == 0:
        out = _en_words(h) + (" o clock" if not ampm else "")
    else:
        out = _en_words(h) + " " + ("oh " if mi < 10 else "") + _en_words(mi)
    if s:
        out += f" and {_en_words(int(s))} seconds"
    return out + (f" {ampm.lower()} m" if ampm else "")


def _ordinal(m: re.Match[str], lang: Lang) -> str:
    value = int(m.group("num"))
    if lang == "zh":
        return "第" + zh_number(str(value))
    return _num2words(value, to="ordinal")


def _range(m: re.Match[str], lang: Lang) -> str:
    if lang == "zh":
        return zh_number(m.group("a")) + "到" + zh_number(m.group("b"))
    return en_number(m.group("a")) + " to " + en_number(m.group("b"))


def _temperature(m: re.Match[str], lang: Lang) -> str:
    sym = m.group("sym")
    scale = m.group("scale") or {"℃": "C", "℉": "F"}.get(sym or "")
    if lang == "zh":
        number = zh_number(m.group("num"), m.group("sign"))
        return {"C": "摄氏", "F": "华氏"}.get(scale or "", "") + number + "度"
    unit = {"C": " degrees Celsius", "F": " degrees Fahrenheit"}.get(scale or "", " degrees")
    return en_number(m.group("num"), m.group("sign")) + unit


def _unit(m: re.Match[str], lang: Lang) -> str:
    en, zh = _UNITS[m.group("unit")]
    if lang == "zh":
        return zh_number(m.group("num")) + zh
    return en_number(m.group("num")) + " " + en


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


_RULES: tuple[tuple[re.Pattern[str], Rule], ...] = (
    (_CURRENCY, _currency),
    (_PERCENT, _percent),
    (_ISO_DATE, _iso_date),
    (_SLASH_DATE, _slash_date),
    (_TIME, _time),
    (_ORDINAL_EN, _ordinal),
    (_TEMPERATURE, _temperature),
    (_UNIT_AFTER_NUMBER, _unit),
    (_RANGE, _range),
    (_NUMBER, _number),
)
