"""Subtitle cues by the conventions, on any text: two lines of 42 (16 for Chinese), 7 s, cuts at
sentence and clause marks, every character in exactly one cue, timed within the segment."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from core.text.cues import (
    MAX_CUE_S,
    PlacedSegment,
    align_words,
    line_width,
    segment_cues,
    shown,
    word_times,
    wrap,
)

WORDS = st.sampled_from(
    [
        "the",
        "quick",
        "brown",
        "fox,",
        "jumps.",
        "over",
        "a",
        "lazy",
        "dog!",
        "[uv_break]",
        "你好，",
        "世界。",
        "语音",
        "合成",
        "internationalization",
        "1204",
        "Why?",
    ]
)
TEXTS = st.lists(WORDS, min_size=1, max_size=80).map(" ".join)


def check(text: str, segment: PlacedSegment) -> list[tuple[int, int, float, float, str]]:
    cues = segment_cues(text, segment)
    spans = [(c.begin, c.end_char, c.start, c.end, c.text) for c in cues]
    # Every character but spaces in exactly one cue, in order.
    assert "".join(text[a:b] for a, b, *_ in spans).replace(" ", "") == text[
        segment.begin : segment.stop
    ].replace(" ", "")
    assert all(b <= c for (_, b, *_), (c, *_) in itertools.pairwise(spans))
    # Within the segment's audio, back to back, never overlapping.
    assert spans[0][2] == round(segment.start, 3) and spans[-1][3] == round(segment.end, 3)
    assert all(x[3] == y[2] for x, y in itertools.pairwise(spans))
    for a, b, start, end, body in spans:
        flat = body.replace("\n", "").replace(" ", "")
        assert start <= end and flat == shown(text[a:b]).replace(" ", "")
        lines = body.split("\n")
        single_word = len(shown(text[a:b]).split(" ")) == 1
        if not single_word:
            assert len(lines) <= 2, body
            assert all(len(line) <= line_width(body) for line in lines), body
    return spans


@settings(max_examples=300, deadline=None)
@given(TEXTS, st.floats(0.5, 60.0))
def test_any_text_makes_cues_by_the_conventions(text: str, seconds: float) -> None:
    spans = check(text, PlacedSegment(1.0, 1.0 + seconds, 0, len(text)))
    for a, b, start, end, _ in spans:
        if len(shown(text[a:b]).split(" ")) > 1 and not any(
            "\u4e00" <= ch <= "\u9fff" for ch in text[a:b]
        ):
            assert end - start <= MAX_CUE_S + 1e-6, (text[a:b], end - start)


def test_sentences_are_cues_and_a_long_one_is_cut_at_its_clause() -> None:
    text = (
        "Three short sentences. Each one its own cue. Even the last one! And then a long "
        "sentence follows them, running on past what two lines can hold, until it ends."
    )
    spans = check(text, PlacedSegment(0.0, 12.0, 0, len(text)))
    assert [s[4] for s in spans] == [
        "Three short sentences.",
        "Each one its own cue.",
        "Even the last one!",
        "And then a long sentence follows them,",
        "running on past what two lines can hold,\nuntil it ends.",
    ]


def test_a_flash_of_a_sentence_joins_its_neighbour() -> None:
    text = "Yes. The rest of it is said slowly and at length."
    spans = check(text, PlacedSegment(0.0, 4.0, 0, len(text)))
    assert len(spans) == 1 and spans[0][4].startswith("Yes. The rest")


def test_chinese_lines_are_sixteen_characters() -> None:
    text = "大家早上好，今天我们来谈一谈语音合成的技术，以及它在生活中的各种应用。"
    spans = check(text, PlacedSegment(0.0, 9.0, 0, len(text)))
    assert len(spans) >= 2 and all(len(line) <= 16 for s in spans for line in s[4].split("\n"))


def test_word_times_place_the_cuts() -> None:
    text = (
        "The first part of it runs on for quite a while, [lbreak] and the second part is here, "
        "too, a little longer."
    )
    second = text.index("and")
    words = ((0, 0.0), (6, 0.4), (second, 3.0), (second + 4, 3.3))
    cues = segment_cues(text, PlacedSegment(0.0, 5.0, 0, len(text), words))
    assert len(cues) == 2 and cues[1].start == 3.0  # where the engine heard "and", not 40 %
    estimated = segment_cues(text, PlacedSegment(0.0, 5.0, 0, len(text)))
    assert estimated[1].start != 3.0


def test_wrap_breaks_near_the_middle_and_refuses_three_lines() -> None:
    assert wrap("short") == "short"
    assert wrap("one two three four five six seven eight nine ten eleven") == (
        "one two three four five six\nseven eight nine ten eleven"
    )
    assert wrap("word " * 30) is None


def test_words_of_a_segment_are_placed_in_the_jobs_text() -> None:
    text = "Hello  there. [laugh] Friend."
    piece = "Hello there. [laugh] Friend."  # the cut squeezed a space
    assert align_words(piece, text, (0, len(text)), [(0, 0), (6, 10), (21, 20)]) == [
        (0, 0),
        (7, 10),
        (22, 20),
    ]
    assert align_words("Hello there two", text, (0, 13), [(0, 0)]) == []  # normalized: none


def test_words_are_estimated_where_the_engine_says_nothing() -> None:
    text = "One two, three [uv_break] four. 你好"
    estimated = word_times(text, PlacedSegment(1.0, 4.0, 0, len(text)))
    assert [w.word for w in estimated] == ["One", "two,", "three", "four.", "你", "好"]
    assert estimated[0].start == 1.0 and estimated[-1].end == 4.0
    assert all(a.end <= b.start and a.start < a.end for a, b in itertools.pairwise(estimated))
    heard = word_times(text, PlacedSegment(1.0, 4.0, 0, len(text), ((0, 1.0), (4, 1.5))))
    assert heard[1].start == 1.5  # the engine's time, not the estimate
