"""Character and word times of a spoken segment, estimated from its duration."""

from __future__ import annotations

import itertools

import pytest

from core.text.alignment import char_times, words_of


def test_characters_share_the_duration_by_how_long_they_take_to_say() -> None:
    chars, starts, durations = char_times("Hi, 你好.", 1000.0)
    assert chars == list("Hi, 你好.")
    assert starts[0] == 0.0
    assert sum(durations) == pytest.approx(1000.0)
    assert all(
        b == pytest.approx(a + d)
        for a, b, d in zip(starts[:-1], starts[1:], durations[:-1], strict=True)
    )
    by_char = dict(zip(chars, durations, strict=True))
    assert by_char["你"] == pytest.approx(3 * by_char["H"])  # a syllable, three letters
    assert by_char[","] > by_char[" "] > 0  # a clause mark is a short pause


def test_words_in_english_chinese_and_mixed() -> None:
    text = "[laugh] Hello, world! 你好，世界。ok 3.14"
    words = words_of(*char_times(text, 3000.0))
    assert [w for w, _, _ in words] == [
        "Hello,",
        "world!",
        "你",
        "好，",
        "世",
        "界。",
        "ok",
        "3.14",
    ]
    assert words[0][1] > 0  # the token before it takes a little time
    assert words[-1][2] == pytest.approx(3000.0)
    assert all(start < end for _, start, end in words)
    assert all(a[2] <= b[1] + 1e-9 for a, b in itertools.pairwise(words))


def test_empty_and_silent_text() -> None:
    assert char_times("", 500.0) == ([], [], [])
    assert words_of(*char_times("[uv_break] ...", 500.0)) == []
