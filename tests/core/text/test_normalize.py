"""Text normalization for ChatTTS: what a person typed is spoken, not silently dropped."""

from __future__ import annotations

import pytest

from core.text.normalize import is_speakable, normalize


@pytest.mark.parametrize(
    ("text", "hint", "expected"),
    [
        # Mandarin numbers, measure words, identifiers
        ("我有3个苹果", "zh", "我有三个苹果"),
        ("一共2年", "zh", "一共两年"),
        ("人口1,234,567人", "zh", "人口一百二十三万四千五百六十七人"),
        ("圆周率3.14", "zh", "圆周率三点一四"),
        ("电话13812345678", "zh", "电话一三八一二三四五六七八"),
        ("温度是-5℃", "zh", "温度是摄氏负五度"),
        # Mandarin dates, times, percentages, money, ranges
        ("2024年3月5日", "zh", "二零二四年三月五日"),
        ("会议在2024-03-05 10:05开始", "zh", "会议在二零二四年三月五日十点零五分开始"),
        ("现在是10:00", "zh", "现在是十点整"),
        ("增长了12.5%", "zh", "增长了百分之十二点五"),
        ("花了¥12.05元", "zh", "花了十二元零五分"),
        ("售价$5M", "zh", "售价五百万美元"),
        ("价格从10~20元不等", "zh", "价格从十到二十元不等"),
        # English
        (
            "It costs $1,234.50 today",
            "en",
            "It costs one thousand two hundred and thirty four dollars and fifty cents today",
        ),
        (
            "Meet me at 10:30 am on 2024-03-05.",
            "en",
            "Meet me at ten thirty a m on March fifth twenty twenty four.",
        ),
        (
            "Born in 1999, now 25% older",
            "en",
            "Born in nineteen ninety nine, now twenty five percent older",
        ),
        ("The 21st floor", "en", "The twenty first floor"),
        ("It is 72°F outside", "en", "It is seventy two degrees Fahrenheit outside"),
        ("3-5 people & 2 dogs = fun", "en", "three to five people and two dogs equals fun"),
        ("5 kg at 10km/h", "en", "five kilograms at ten kilometers per hour"),
        ("Temperatures of -3.5 degrees", "en", "Temperatures of minus three point five degrees"),
        ("#1 fan @home", "en", "number one fan at home"),
        ("€20 or £1", "en", "twenty euros or one pound"),
        # Accents, width, tags, context
        ("café naïve", "en", "cafe naive"),
        ("１２３", "zh", "一百二十三"),
        ("[laugh]哈哈[uv_break]好的", "zh", "[laugh]哈哈[uv_break]好的"),
        ("123", "en", "one hundred and twenty three"),
        ("123", "zh", "一百二十三"),
        ("我有3个苹果。It costs $5", "zh", "我有三个苹果。It costs five dollars"),
    ],
)
def test_normalize(text: str, hint: str, expected: str) -> None:
    assert normalize(text, hint) == expected


@pytest.mark.parametrize("text", ["😀📞", "!!!???", "こんにちは", "   ", "[laugh]", "---"])
def test_nothing_speakable_normalizes_to_empty(text: str) -> None:
    assert normalize(text) == ""
    assert not is_speakable(text)


def test_output_holds_only_what_chattts_keeps() -> None:
    import re

    text = normalize("Price: $5 (50% off!) — 今天¥3/kg; call 010-12345678 ~ 9:30 ±2 «ok»", "zh")
    assert re.fullmatch(r"[\u4e00-\u9fffA-Za-z，。、,. ]+", text), text
    assert not re.search(r"\d", text)


def test_language_hint_accepts_bcp47() -> None:
    assert normalize("42", "en-US") == "forty two"
    assert normalize("42", "zh-CN") == "四十二"


def test_normalize_does_not_import_torch() -> None:
    import subprocess
    import sys

    code = (
        "import sys; import core.text.normalize, core.voices.chattts, "
        "workers.engines.chattts; core.text.normalize.normalize('3'); "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
