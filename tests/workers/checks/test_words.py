"""A segment's text as words and readings, and how a transcript differs from it."""

from __future__ import annotations

from workers.checks.words import compare, language_of, readings, words_of


def test_numbers_are_spelled_as_the_normalizer_speaks_them() -> None:
    assert words_of("It costs 42 dollars.", "en") == ["it", "costs", "forty", "two", "dollars"]
    assert words_of("你好，世界", "zh") == ["你", "好", "世", "界"]


def test_readings_allow_each_way_a_number_or_title_is_read() -> None:
    slots = readings("Dr. Smith, in 1992.", "en")
    assert slots[0] == [["dr"], ["doctor"]]
    year = slots[-1]
    assert ["nineteen", "ninety", "two"] in year
    assert ["one", "thousand", "nine", "hundred", "ninety", "two"] in year
    money = readings("$5", "en")[0]
    assert ["five", "dollars"] in money and ["dollar", "five"] in money


def test_the_longest_run_of_differing_words_is_what_counts() -> None:
    expected = ["the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog"]
    scattered = compare(
        expected, ["a", "quick", "brown", "cat", "jumps", "over", "a", "lazy", "dog"]
    )
    dropped = compare(expected, ["the", "quick", "brown", "dog"])
    assert scattered.longest_run == 1 and scattered.error_rate > 0.3
    assert dropped.longest_run == 5
    assert ("fox jumps over the lazy", "") in dropped.differing


def test_language_of_a_segment() -> None:
    assert language_of("Hello") == "en"
    assert language_of("你好 hello") == "zh"
    assert language_of("123 !") == ""
