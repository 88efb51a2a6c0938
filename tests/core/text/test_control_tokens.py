"""ChatTTS's control tokens in a text and a sentence prompt: accepted, refused with a reason, and
kept whole (never cut, never split off, never spoken) through normalization and segmentation."""

from __future__ import annotations

import re

import pytest

from core.text.control_tokens import (
    PAUSE_MS,
    PROMPT_TOKENS,
    TEXT_TOKENS,
    TOKEN_SHAPE,
    VOCABULARY,
    WORD_TOKENS,
    TokenError,
    check_text_tokens,
    parse_prompt,
    strip_tokens,
)
from core.text.normalize import is_speakable, normalize
from core.text.sentences import split_sentences


def test_the_vocabulary_splits_into_its_kinds() -> None:
    assert len(VOCABULARY) == len(set(VOCABULARY)) == 50
    assert WORD_TOKENS == (
        "[uv_break]",
        "[v_break]",
        "[lbreak]",
        "[llbreak]",
        "[undefine]",
        "[laugh]",
        "[music]",
        "[pure]",
    )
    assert len(PROMPT_TOKENS) == 10 + 3 + 8
    assert set(TEXT_TOKENS) == set(WORD_TOKENS) | set(PROMPT_TOKENS)
    assert all(TOKEN_SHAPE.fullmatch(t) for t in VOCABULARY)
    assert PAUSE_MS["[break_0]"] == 0 and PAUSE_MS["[break_7]"] == 700
    assert PAUSE_MS["[uv_break]"] < PAUSE_MS["[v_break]"] < PAUSE_MS["[lbreak]"]


@pytest.mark.parametrize(
    "text",
    [
        "What is [uv_break]your favorite english food?[laugh][lbreak]",
        "你好[v_break]世界[llbreak]",
        "[oral_2]Hello [break_7] there [laugh_2]",
        # Brackets that are not token-shaped are plain text.
        "See note [1], page [12].",
        "see [note 1] and [a, b] and [注释]",
        "[] [_x] [1abc] [ laugh ]",
    ],
)
def test_texts_with_accepted_tokens_or_plain_brackets_pass(text: str) -> None:
    check_text_tokens(text)


@pytest.mark.parametrize(
    ("text", "token", "code", "words"),
    [
        ("Hello [cough] there", "[cough]", "unknown_control_token", "unknown control token"),
        ("a [break_9] b", "[break_9]", "unknown_control_token", "unknown"),
        ("a [oral_x] b", "[oral_x]", "unknown_control_token", "unknown"),
        ("a [laugh_3]", "[laugh_3]", "unknown_control_token", "unknown"),
        ("a [Laugh]", "[Laugh]", "unknown_control_token", "unknown"),
        ("see [note]", "[note]", "unknown_control_token", "unknown"),
        ("fast [speed_9] now", "[speed_9]", "misplaced_control_token", "'speed' field"),
        ("hi [Stts][spk_emb] there", "[Stts]", "misplaced_control_token", "frames"),
        ("hi [spk_emb]", "[spk_emb]", "misplaced_control_token", "frames"),
    ],
)
def test_unknown_or_misplaced_tokens_in_a_text_are_named(
    text: str, token: str, code: str, words: str
) -> None:
    with pytest.raises(TokenError) as info:
        check_text_tokens(text)
    error = info.value
    assert error.token == token and error.code == code
    assert token in error.message and words in error.message
    for accepted in ("[uv_break]", "[lbreak]", "[laugh]", "[oral_9]", "[break_7]"):
        assert accepted in error.message  # the accepted ones are listed


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        ("[oral_2][laugh_0][break_6]", "[oral_2][laugh_0][break_6]"),
        ("  [break_7]  [oral_9] ", "[break_7][oral_9]"),
        ("[laugh_2]", "[laugh_2]"),
    ],
)
def test_prompts_are_checked_and_compacted(prompt: str, expected: str) -> None:
    assert parse_prompt(prompt) == expected


@pytest.mark.parametrize(
    ("prompt", "token", "code", "words"),
    [
        ("[oral_2][break_9]", "[break_9]", "unknown_control_token", "unknown control token"),
        ("[oral_x]", "[oral_x]", "unknown_control_token", "unknown"),
        ("[cough]", "[cough]", "unknown_control_token", "unknown"),
        ("[laugh]", "[laugh]", "misplaced_control_token", "word-level"),
        ("[speed_5]", "[speed_5]", "misplaced_control_token", "'speed' field"),
        ("[Ptts]", "[Ptts]", "misplaced_control_token", "frames"),
        ("[oral_2] please", "please", "invalid_prompt", "not a control token"),
        ("[oral_2][oral_3]", "[oral_3]", "invalid_prompt", "twice"),
        ("   ", "", "invalid_prompt", "empty"),
        ("[oral_2]" * 10, "", "invalid_prompt", "at most"),
    ],
)
def test_bad_prompts_are_named(prompt: str, token: str, code: str, words: str) -> None:
    with pytest.raises(TokenError) as info:
        parse_prompt(prompt)
    error = info.value
    assert error.token == token and error.code == code and words in error.message
    if code != "invalid_prompt" or words == "not a control token":
        assert "[oral_0]" in error.message and "[break_7]" in error.message


def test_strip_tokens_leaves_the_words() -> None:
    assert strip_tokens("a[laugh]b [uv_break] c").split() == ["a", "b", "c"]
    assert strip_tokens("[cough]") == "[cough]"  # unknown ones are not tokens to strip


# -- normalization ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "hint", "expected"),
    [
        ("[laugh]哈哈[uv_break]好的", "zh", "[laugh]哈哈[uv_break]好的"),
        ("我有3个[lbreak]苹果[llbreak]", "zh", "我有三个[lbreak]苹果[llbreak]"),
        ("I have 3[uv_break] cats [laugh].", "en", "I have three [uv_break] cats [laugh]."),
        ("Wait[v_break]... 5%[break_3]!", "en", "Wait[v_break]. five percent [break_3]."),
        ("[oral_2]Hello[music]", "en", "[oral_2]Hello[music]"),
        # Plain brackets: spoken without them; an unknown token is dropped, never spoken.
        ("See note [1].", "en", "See note one."),
        ("Hello [cough] there", "en", "Hello there"),
        ("你好[note]世界", "zh", "你好世界"),
    ],
)
def test_normalize_keeps_tokens_verbatim(text: str, hint: str, expected: str) -> None:
    assert normalize(text, hint) == expected


def test_a_text_of_tokens_alone_has_nothing_to_say() -> None:
    for text in ("[laugh]", "[uv_break] [lbreak]", "[laugh] !!! [cough]"):
        assert normalize(text) == "" and not is_speakable(text)


@pytest.mark.parametrize(
    ("text", "hint", "expected"),
    [
        ("I have 3 cats & 2 dogs.", "en", "I have cats dogs."),
        ("我有3个苹果！", "zh", "我有个苹果。"),
        ("Price: $5[laugh] (50% off!)", "en", "Price, [laugh], off."),
        ("café [uv_break] naïve", "en", "cafe [uv_break] naive"),
    ],
)
def test_without_spelling_numbers_and_symbols_are_dropped_as_chattts_does(
    text: str, hint: str, expected: str
) -> None:
    assert normalize(text, hint, spell=False) == expected


def test_without_spelling_digits_alone_are_not_speakable() -> None:
    assert normalize("123", "en", spell=False) == ""
    assert not is_speakable("123", "en", spell=False)
    assert is_speakable("123", "en")


# -- segmentation ----------------------------------------------------------------------------


def _tokens(segment: str) -> list[str]:
    return TOKEN_SHAPE.findall(segment)


def _assert_whole(text: str, segments: list[str]) -> None:
    """Every token of `text` is in exactly one segment, whole, in order; no segment is only
    tokens; no bracket is left over from a cut token."""
    assert [t for s in segments for t in _tokens(s)] == _tokens(text)
    for segment in segments:
        rest = TOKEN_SHAPE.sub("", segment)
        assert re.search(r"[A-Za-z\u4e00-\u9fff]", rest), segments
        assert "[" not in rest and "]" not in rest, segments


@pytest.mark.parametrize(
    ("text", "max_chars"),
    [
        ("One. [lbreak] Two.", 200),
        ("One. [lbreak] Two.", 6),
        ("Hello there. [laugh]", 12),
        ("[laugh] Hello there. Bye now.", 12),
        ("你好[uv_break]世界[laugh]欢迎使用语音合成。", 5),
        ("你好[uv_break]世界[laugh]欢迎使用语音合成。", 4),
        ("abc[uv_break]defghijklmnop", 4),
        ("x" * 30 + "[lbreak]" + "y" * 30, 10),
        ("Sentence one, [v_break] clause two, [llbreak] clause three. [laugh]", 15),
        ("[oral_2][laugh] [uv_break] Start here, then go on and on and on.", 10),
        ("好的。[laugh]。[lbreak]。再见。", 3),
    ],
)
def test_split_never_cuts_a_token_or_leaves_it_alone(text: str, max_chars: int) -> None:
    segments = split_sentences(text, max_chars)
    assert segments
    _assert_whole(text, segments)


def test_split_keeps_a_token_with_the_text_before_it() -> None:
    assert split_sentences("Hello there. [laugh]", 12) == ["Hello there. [laugh]"]
    assert split_sentences("[laugh] Hello there. Bye now.", 12) == [
        "[laugh] Hello there.",
        "Bye now.",
    ]
    assert split_sentences("One. [lbreak] Two.") == ["One. [lbreak] Two."]


def test_split_of_tokens_alone_is_empty() -> None:
    assert split_sentences("[laugh] [uv_break]") == []
