"""The live cutter on real text fed as an LLM writes it: sentence and clause cuts, numbers,
abbreviations and control tokens kept whole, and nothing lost however the text is pieced."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.text.control_tokens import TOKEN_SHAPE
from core.text.live_cuts import LiveCutter
from core.text.sentences import clean_text, has_speakable

NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")


def cut(text: str, pieces: list[str] | None = None, **options: float) -> list[str]:
    cutter = LiveCutter(**options)  # type: ignore[arg-type]
    segments = [s for piece in (pieces or [text]) for s in cutter.feed(piece)]
    segments += cutter.flush()
    assert cutter.pending == ""
    return segments


def tokens_of(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def by_piece_sizes(text: str) -> dict[str, list[str]]:
    return {str(n): cut(text, tokens_of(text, n)) for n in (1, 3, 5)}


ENGLISH = (
    "Thanks for asking about the weather today. It will be sunny in the morning, with a light "
    "breeze from the west, and rain is expected late in the evening. Dr. Smith, our local "
    "meteorologist, says the temperature will peak at 23.5 degrees around 3:30 p.m. and that "
    "the U.S. forecast agrees, e.g. the coast will stay dry. Enjoy your day!"
)
CHINESE = (
    "今天的天气非常好，早上阳光明媚，中午会有一点微风，温度大约在二十三度左右，非常适合出门散步。"
    "晚上可能会下小雨，记得带伞。祝你有美好的一天！"
)


def test_english_is_cut_at_sentences_the_first_early_at_a_clause() -> None:
    segments = cut(ENGLISH)
    assert segments == [
        "Thanks for asking about the weather today.",
        "It will be sunny in the morning, with a light breeze from the west, and rain is "
        "expected late in the evening.",
        "Dr. Smith, our local meteorologist, says the temperature will peak at 23.5 degrees "
        "around 3:30 p.m. and that the U.S. forecast agrees, e.g. the coast will stay dry.",
        "Enjoy your day!",
    ]
    # An LLM's tokens, or single characters, give the same segments.
    assert set(map(tuple, by_piece_sizes(ENGLISH).values())) == {tuple(segments)}


def test_the_first_segment_starts_early_and_later_ones_grow() -> None:
    text = (
        "When you arrive at the station, walk past the ticket machines, turn left at the bakery, "
        "cross the small square with the fountain, keep going past the library and the town hall, "
        "and you will find our office on the second floor of the red building, next to the bank."
    )
    segments = cut(text)
    # 40 characters, then 80, then 160: each cut at the first clause mark past its threshold.
    assert segments == [
        "When you arrive at the station, walk past the ticket machines,",  # 40+
        "turn left at the bakery, cross the small square with the fountain, keep going past the "
        "library and the town hall,",  # 80+
        "and you will find our office on the second floor of the red building, next to the bank.",
    ]
    assert by_piece_sizes(text) == {n: segments for n in ("1", "3", "5")}


def test_chinese_is_cut_at_its_own_marks() -> None:
    segments = cut(CHINESE)
    assert segments == [
        # 37 characters at the last clause mark: under 40, so the first sentence is whole.
        "今天的天气非常好，早上阳光明媚，中午会有一点微风，温度大约在二十三度左右，非常适合出门散步。",
        "晚上可能会下小雨，记得带伞。",
        "祝你有美好的一天！",
    ]
    assert (
        cut("你好，" + CHINESE)[0]
        == "你好，今天的天气非常好，早上阳光明媚，中午会有一点微风，温度大约在二十三度左右，"
    )
    assert set(map(tuple, by_piece_sizes(CHINESE).values())) == {tuple(segments)}


def test_mixed_chinese_and_english() -> None:
    text = "我们今天用 Python 写了一个 demo。It works well! 下一步是部署到 AWS 上。"
    assert cut(text, tokens_of(text, 2)) == [
        "我们今天用 Python 写了一个 demo。",
        "It works well!",
        "下一步是部署到 AWS 上。",
    ]


@pytest.mark.parametrize(
    "text",
    [
        "The value of pi is roughly 3.14159 and that is enough. Next one.",
        "The house cost $1,000,000.50 in total, which is a lot. Next one.",
        "The train leaves at 10:30 sharp from platform nine. Next one.",
        "Mr. and Mrs. Jones met Prof. Lee and J. K. Rowling yesterday. Next one.",
        "You need tools, e.g. a hammer, i.e. something heavy, at 5 a.m. sharp. Next one.",
        "Wait... let me think about that for a second here. Next one.",
        "Visit https://example.com/a?b=1 or write to me@example.com today. Next one.",
    ],
)
def test_no_cut_inside_numbers_abbreviations_urls_or_a_continued_ellipsis(text: str) -> None:
    first = text.removesuffix(" Next one.")
    for pieces in ([text], list(text), tokens_of(text, 4)):
        assert cut(text, pieces, first_chars=200) == [first, "Next one."]


def test_a_mark_waits_for_what_follows_it() -> None:
    cutter = LiveCutter()
    assert cutter.feed("It is now exactly 3.") == []
    assert cutter.feed("14") == []  # not a sentence end: a number
    assert cutter.feed(" o'clock and the train is late again.") == []
    assert cutter.feed(" The") == ["It is now exactly 3.14 o'clock and the train is late again."]
    assert cutter.pending == "The"
    assert cutter.flush() == ["The"]


def test_control_tokens_are_never_cut_and_go_with_the_text_after_them() -> None:
    text = "[laugh] That is really funny, you know. [uv_break] But now, back to work! [lbreak]"
    expected = [
        "[laugh] That is really funny, you know.",
        "[uv_break] But now, back to work! [lbreak]",
    ]
    assert cut(text) == expected
    for n in (1, 2, 3, 7):
        assert cut(text, tokens_of(text, n)) == expected
    cutter = LiveCutter()
    assert cutter.feed("Sure thing. [uv_") == []  # a token still being written is not text
    assert cutter.feed("break] Here") == ["Sure thing."]


def test_a_short_sentence_joins_the_next_only_if_it_is_already_here() -> None:
    text = "Hi. How are you doing today? Fine."
    assert cut(text) == ["Hi. How are you doing today?", "Fine."]
    cutter = LiveCutter()
    assert cutter.feed("Hi. H") == ["Hi."]  # never waits for the next sentence
    assert "".join(cut("1. First item\n2. Second item\n")) == "1. First item2. Second item"


def test_long_text_without_marks_is_cut_at_a_word_break() -> None:
    words = " ".join(f"word{n}" for n in range(100))
    segments = cut(words, tokens_of(words, 3), max_chars=50)
    assert all(len(s) <= 50 for s in segments)
    assert " ".join(segments) == words
    chinese = "我" * 130
    assert cut(chinese, max_chars=50) == ["我" * 50, "我" * 50, "我" * 30]


def test_flush_speaks_a_sentence_not_finished_and_clear_drops_it() -> None:
    cutter = LiveCutter()
    assert cutter.feed("Let me think about") == []
    assert cutter.flush() == ["Let me think about"]
    assert cutter.feed("Something else entirely, which") == []
    cutter.clear()
    assert cutter.pending == ""
    assert cutter.flush() == []
    assert cut("[laugh] ... !") == []  # nothing to say at all


def test_whitespace_and_invisible_characters_are_cleaned() -> None:
    assert cut("  Hello\u200b   there,\t my\r\nfriend.  ") == ["Hello there, my", "friend."]


def test_unspeakable_streams_take_linear_time() -> None:
    for junk in (".", "!?", "[uv_break]", "Hello" + "!" * 10):
        cutter = LiveCutter()
        for ch in junk * 2000:
            cutter.feed(ch)  # a quadratic cutter takes minutes here
        assert len(cutter.flush()) <= 1


PARTS = st.sampled_from(
    [
        "the", "quick", "brown", "fox", "Hello.", "fine,", "What?", "Wow!", "wait...", "Dr.",
        "e.g.", "U.S.", "J.", "3.14", "1,000.50", "10:30", "42.", "[uv_break]", "[laugh]",
        "你好，", "世界。", "今天", "天气", "怎么样？", "“好的。”", "https://example.com/a?b=1",
        "a.b@c.com", "—", "\n", ";", "1.", "…", "!!!", '"Stop."', "x" * 30, "ab\u200bc", "[uv_",
        "[1]", "价格是1,000元",
    ]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(st.tuples(PARTS, st.sampled_from([" ", " ", "", "\n", "  "])), max_size=80),
    sizes=st.lists(st.integers(1, 6), min_size=1, max_size=20),
    whole=st.booleans(),
    max_chars=st.sampled_from([30, 80, 200]),
)
def test_any_piecing_keeps_every_speakable_character_in_order(
    parts: list[tuple[str, str]], sizes: list[int], whole: bool, max_chars: int
) -> None:
    text = "".join(part + gap for part, gap in parts)
    pieces, at = [], 0
    while not whole and at < len(text):
        size = sizes[len(pieces) % len(sizes)]
        pieces.append(text[at : at + size])
        at += size
    segments = cut(text, pieces or [text], first_chars=10, max_chars=max_chars)
    cleaned = clean_text(text)
    if not has_speakable(TOKEN_SHAPE.sub("", cleaned)):
        assert segments == []
        return
    assert "".join(segments).replace(" ", "") == cleaned.replace(" ", "")
    for segment in segments:
        assert segment == clean_text(segment)
        assert has_speakable(TOKEN_SHAPE.sub("", segment))
        bare = " ".join(TOKEN_SHAPE.sub("", segment).split())
        assert len(bare) <= max_chars or not has_speakable(bare[max_chars:])
    # No number and no control token is cut in two.
    for pattern in (NUMBER, TOKEN_SHAPE):
        assert sum(len(pattern.findall(s)) for s in segments) == len(pattern.findall(cleaned))
