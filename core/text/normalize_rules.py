"""The patterns `normalize` spells out (money, percentages, dates, times, ordinals, ranges,
temperatures, units, plain numbers) and what each match reads as in Mandarin and in English."""

from __future__ import annotations

import re
from collections.abc import Callable

from core.text.normalize_numbers import (
    Lang,
    en_digits,
    en_number,
    en_words,
    en_year,
    num2words_en,
    ungroup,
    zh_digits,
    zh_number,
)

# Every pattern that starts with a number starts it where a run of digits starts ((?<!\d)):
# otherwise each of a run's n digits is a start that scans the rest of the run, O(n^2) in the
# length of a digit run (4,000 digits took 2.7 s), and the earliest start matches the same text.
_NUM = r"(?<!\d)\d+(?:,\d{3})*(?:\.\d+)?"
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

Rule = Callable[["re.Match[str]", Lang], str]


def _number(m: re.Match[str], lang: Lang) -> str:
    num, sign = m.group("num"), m.group("sign")
    plain = ungroup(num)
    # Identifiers (phone numbers, codes, leading zeros) are read digit by digit.
    whole = num.isdigit()  # no grouping commas, no decimal point
    if whole and (len(plain) >= 11 or (len(plain) > 1 and plain[0] == "0")):
        return zh_digits(plain) if lang == "zh" else en_digits(plain)
    if lang == "zh":
        rest = m.string[m.end() : m.end() + 1]
        if len(plain) == 4 and rest == "年":
            return zh_digits(plain)
        if plain == "2" and not sign and rest in _MEASURE_WORDS:
            return "两"
        return zh_number(num, sign)
    if (
        whole
        and not sign
        and len(plain) == 4
        and 1100 <= int(plain) <= 2099
        and _YEAR_WORDS_EN.search(m.string[: m.start()])
    ):
        return en_year(plain)
    return en_number(num, sign)


def _currency(m: re.Match[str], lang: Lang) -> str:
    sym, num, sign = m.group("sym"), m.group("num"), m.group("sign")
    scale = (m.group("scale") or "").lower()
    whole, _, frac = ungroup(num).partition(".")
    if lang == "zh":
        unit = _MONEY_ZH[sym]
        if scale:
            return zh_number(num, sign) + _SCALE_ZH.get(scale, scale) + unit
        cents = frac[:2].ljust(2, "0")
        out = zh_number(whole, sign) + unit
        if cents[0] != "0":
            out += zh_digits(cents[0]) + "角"
        if cents[1] != "0":
            out += ("零" if cents[0] == "0" else "") + zh_digits(cents[1]) + "分"
        return out
    one, many, minor_one, minor_many = _MONEY_EN[sym]
    prefix = "minus " if sign else ""
    if scale:
        return f"{prefix}{en_number(num)} {_SCALE_EN.get(scale, scale)} {many}"
    words = f"{prefix}{en_words(whole)} {one if whole == '1' else many}"
    minor = int(frac[:2].ljust(2, "0")) if frac else 0
    if minor:
        words += f" and {en_words(minor)} {minor_one if minor == 1 else minor_many}"
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
        return f"{zh_digits(y)}年{zh_number(str(month))}月{zh_number(str(day))}日"
    day_words = num2words_en(day, to="ordinal")
    return f"{_MONTHS_EN[month - 1]} {day_words} {en_year(y)}"


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
        out = en_words(h) + (" o clock" if not ampm else "")
    else:
        out = en_words(h) + " " + ("oh " if mi < 10 else "") + en_words(mi)
    if s:
        out += f" and {en_words(int(s))} seconds"
    return out + (f" {ampm.lower()} m" if ampm else "")


def _ordinal(m: re.Match[str], lang: Lang) -> str:
    value = int(m.group("num"))
    if lang == "zh":
        return "第" + zh_number(str(value))
    return num2words_en(value, to="ordinal")


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


RULES: tuple[tuple[re.Pattern[str], Rule], ...] = (
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
