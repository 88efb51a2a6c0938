"""PendingText: text kept as it came, cut only as segments are asked for."""

from __future__ import annotations

from web.live.text import SLICE_CHARS, PendingText


def test_segments_are_cut_as_they_are_asked_for() -> None:
    text = PendingText()
    answer = "Say this again, and again, and again. " * 100
    text.add(answer)
    assert text.chars == len(answer)
    first = text.next()
    assert first == "Say this again, and again, and again."
    # Only the first slice was cut: the rest waits as it came.
    assert text.cutter.pending.startswith("Say") and len(text.cutter.pending) < SLICE_CHARS
    segments = [first]
    while (segment := text.next()) is not None:
        segments.append(segment)
    # The last sentence too: "again." ends it whatever follows.
    assert " ".join(segments) == answer.strip() and text.chars == 0


def test_a_sentence_that_ends_for_sure_is_flushed_at_once() -> None:
    text = PendingText()
    for token in ("Hello", " world", "."):
        text.add(token)
    assert text.next() == "Hello world."
    text.add("It costs 3.")  # "3.14"?
    assert text.next() is None and text.may_end_a_sentence()
    text.add("14 dollars")
    assert text.next() is None and not text.may_end_a_sentence()
    text.flush()
    assert text.next() == "It costs 3.14 dollars"


def test_clear_drops_everything() -> None:
    text = PendingText()
    text.add("One. Two. Three", flush=False)
    text.clear()
    assert text.chars == 0 and text.next() is None and not text.waiting
