"""Where each character and word of a spoken segment is heard, estimated from its duration by how
long each character takes to say (the subtitle cues' estimate)."""

from __future__ import annotations

import unicodedata
from itertools import pairwise

from core.text.control_tokens import TOKEN_SHAPE
from core.text.cues import spread
from core.text.sentences import has_speakable, is_cjk


def char_times(text: str, duration_ms: float) -> tuple[list[str], list[float], list[float]]:
    """The segment's characters (spaces and control tokens too), each one's start and duration
    in milliseconds from the segment's start; the durations add up to `duration_ms`."""
    times = spread(text, 0.0, duration_ms)
    return list(text), times[:-1], [end - start for start, end in pairwise(times)]


def words_of(
    chars: list[str], starts: list[float], durations: list[float]
) -> list[tuple[str, float, float]]:
    """The words of timed characters as (word, start_ms, end_ms): runs without spaces, each CJK
    character a word of its own (with the punctuation after it); control tokens left out."""
    text = "".join(chars)
    in_tokens = {i for m in TOKEN_SHAPE.finditer(text) for i in range(*m.span())}
    words: list[tuple[str, float, float]] = []
    current: list[int] = []

    def close() -> None:
        word = "".join(chars[i] for i in current)
        if has_speakable(word):
            words.append((word, starts[current[0]], starts[current[-1]] + durations[current[-1]]))
        current.clear()

    for i, ch in enumerate(chars):
        if ch.isspace() or i in in_tokens:
            close()
            continue
        after_cjk = any(is_cjk(chars[j]) and not _mark(chars[j]) for j in current)
        if current and ((is_cjk(ch) or after_cjk) and not _mark(ch)):
            close()
        current.append(i)
    close()
    return words


def _mark(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "PS"
