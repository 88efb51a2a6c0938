"""Numerals spelled out in words: Mandarin through cn2an, English through num2words.

Both libraries are imported on first use (the web tier may never need them).
"""

from __future__ import annotations

from typing import Literal

Lang = Literal["zh", "en"]


def ungroup(num: str) -> str:
    return num.replace(",", "")


# Past this, a numeral is a string of digits (an account number, a digit bomb): read one by one.
# num2words raises beyond 10^306 anyway, and nobody says "a quadrillion and ..." aloud.
MAX_WORDS_DIGITS = 15


def num2words_en(value: int, to: str = "cardinal") -> str:
    """num2words (imported on first use: the web tier may never need it), hyphens as spaces."""
    from num2words import num2words  # type: ignore[import-untyped,import-not-found,unused-ignore]

    if len(str(abs(value))) > MAX_WORDS_DIGITS:
        return en_digits(str(abs(value)))

    # "thirty-four" -> "thirty four": ChatTTS turns hyphens and commas into pauses.
    return str(num2words(value, to=to)).replace("-", " ").replace(",", "")


def en_words(value: str | int) -> str:
    return num2words_en(int(value))


def en_number(num: str, sign: str | None = None) -> str:
    """English words for a numeral such as "1,234.50" (digits after the point one by one)."""
    plain = ungroup(num)
    whole, _, frac = plain.partition(".")
    words = en_words(whole)
    if frac:
        words += " point " + " ".join(en_words(d) for d in frac)
    return ("minus " if sign else "") + words


def zh_number(num: str, sign: str | None = None) -> str:
    """Mandarin for a decimal numeral, e.g. "1,234.5" -> 一千二百三十四点五."""
    import cn2an  # type: ignore[import-untyped,import-not-found,unused-ignore]

    plain = ungroup(num)
    if len(plain.partition(".")[0]) > MAX_WORDS_DIGITS:
        return ("负" if sign else "") + zh_digits(plain)
    try:
        words = str(cn2an.an2cn(plain))
    except (ValueError, KeyError):
        words = zh_digits(plain)
    return ("负" if sign else "") + words


def zh_digits(digits: str) -> str:
    return "".join("零一二三四五六七八九"[int(d)] if d.isdigit() else "点" for d in digits)


_EN_DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def en_digits(digits: str) -> str:
    return " ".join(_EN_DIGITS[int(d)] for d in digits if d.isdigit())


def en_year(year: str) -> str:
    return num2words_en(int(year), to="year")
