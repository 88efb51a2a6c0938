"""What the voices cannot read, told: other scripts and other languages' accented letters."""

from __future__ import annotations

import pytest

from core.text.languages import language_runs, notice, unreadable


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("Hello there, 42 times.", []),
        ("你好，世界。我有3个苹果！", []),
        ("Mixed: 你好 and hello.", []),
        ("こんにちは、世界。", ["Japanese kana"]),
        ("カタカナ and 漢字", ["Japanese kana"]),
        ("안녕하세요", ["Korean"]),
        ("Привет, мир", ["Cyrillic"]),
        ("Bonjour, ça va très bien, merci à vous.", ["letters of a language other than English"]),
    ],
)
def test_what_the_voices_cannot_read(text: str, said: list[str]) -> None:
    found = unreadable(text)
    assert len(found) == len(said) and all(
        f.startswith(s) for f, s in zip(found, said, strict=True)
    )
    assert (notice(text) is None) == (not said)


def test_one_accented_name_in_english_is_english() -> None:
    text = "We met at the café on Main Street and talked about the weather for an hour. " * 3
    assert unreadable(text) == []


def test_mandarin_with_its_punctuation_needs_no_closer_look() -> None:
    """The quick search finds nothing in ordinary Mandarin or English, typographic punctuation
    (“ ” — … ·) and full-width forms included: the character-by-character look is skipped."""
    from core.text.languages import _ELSE

    for text in ("你好，“世界”——这是…第一章·上。", "Hello — “world”… it’s fine.", "ＡＢＣ１２３"):
        assert _ELSE.search(text) is None, text
    assert _ELSE.search("Café") is not None


def test_language_runs_cut_where_sentences_change_language() -> None:
    text = "第一句。第二句！Then English. And more? [uv_break] 42. 最后一句"
    runs = language_runs(text)
    assert [(language, text[a:b]) for language, a, b in runs] == [
        ("zh", "第一句。第二句！"),
        ("en", "Then English. And more? [uv_break] 42."),  # no letters: with the run before
        ("zh", " 最后一句"),
    ]
    assert language_runs("") == [("en", 0, 0)]
    assert language_runs("123. 你好。") == [("zh", 0, 8)]  # no letters first: with the first
    assert language_runs("Dr. Smith said 你好 to me.") == [("en", 0, 24)]
