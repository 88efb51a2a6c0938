"""Normalization costs time linear in its input: every rule against adversarial text of the
longest length a job may have, within a budget no quadratic pattern meets."""

from __future__ import annotations

import time

import pytest

from core.infra.settings import Settings
from core.text.normalize import normalize

N = Settings().limits.max_text_chars
# Linear work on N characters takes milliseconds; a quadratic pattern took 2.7 s on 4,000 digits.
BUDGET_S = 1.0

ADVERSARIAL = {
    "a digit run": "1" * N,
    "a percentage": "1" * (N - 1) + "%",
    "a temperature": "1" * (N - 1) + "°",
    "a range": "1" * (N // 2) + "-" + "1" * (N // 2 - 1),
    "a tilde range": "1 ~ " * (N // 4),
    "money": "$" + "1" * (N - 1),
    "an ordinal": "1" * (N - 2) + "th",
    "thousands groups": "1" + ",000" * ((N - 1) // 4),
    "decimals": "1." * (N // 2),
    "times": "1:" * (N // 2),
    "dates": "1/" * (N // 2),
    "minus signs": "-1" * (N // 2),
    "hyphens": "1-" * (N // 2),
    "units": "1 kg " * (N // 5),
    "words and digits": "a1" * (N // 2),
    "han and digits": "年1" * (N // 2),
    "punctuation": ",." * (N // 2),
    "spaces": " a" * (N // 2),
}


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_adversarial_text_is_normalized_in_linear_time(name: str, lang: str) -> None:
    text = ADVERSARIAL[name]
    assert len(text) <= N
    started = time.perf_counter()
    out = normalize(text, lang)  # type: ignore[arg-type]
    elapsed = time.perf_counter() - started
    assert elapsed < BUDGET_S, f"{name} ({lang}): {elapsed:.2f} s for {len(text)} characters"
    assert isinstance(out, str)


DOCUMENT = Settings().limits.max_document_chars
# Documents are normalized too (the longest is 50 times a job): runs of spaces that dropped
# characters leave once cost their square (14 s for one voice transcript in the web process).
DOCUMENT_BUDGET_S = 10.0
DROPPED = {
    "dropped letters between spaces": "a" + " ж" * (DOCUMENT // 2 - 1),
    "dropped letters in a run": "x" + "ж" * (DOCUMENT - 1),
    "a run of spaces": "a" + " " * (DOCUMENT - 2) + "b",
    "emoji between han": "中 😀 " * (DOCUMENT // 5),
    "tabs and dropped symbols": "\t☃" * (DOCUMENT // 2),
}


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("name", sorted(DROPPED))
def test_dropped_characters_cost_linear_time_at_document_length(name: str, lang: str) -> None:
    text = DROPPED[name]
    started = time.perf_counter()
    normalize(text, lang)  # type: ignore[arg-type]
    elapsed = time.perf_counter() - started
    assert elapsed < DOCUMENT_BUDGET_S, f"{name} ({lang}): {elapsed:.2f} s for {len(text)} chars"


def test_spaces_around_han_go_and_between_words_stay_single() -> None:
    assert normalize("你好 ж  ☃ 世界", "zh") == "你好世界"
    assert normalize("hello  ж   ☃  world", "en") == "hello world"


def test_a_huge_numeral_is_read_digit_by_digit() -> None:
    assert normalize("12345678901234567890%", "en").startswith("one two three four")
    assert normalize("12345678901234567890%", "zh").startswith("百分之一二三四")
    assert normalize("That is 1,234 apples.", "en") == normalize("That is 1234 apples.", "en")
