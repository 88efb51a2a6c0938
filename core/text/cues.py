"""Subtitle cues as subtitlers make them: at most two lines of 42 characters (16 for Chinese),
at most 7 s a cue, cut at sentence, then clause, then word boundaries, timed on the audio.

The worker places each segment of a job on its final audio (its first and last sample, and its
characters in the text). Within a segment a cue starts where its first word is heard: the
engine's own word times where it reports them (eSpeak NG does), else an estimate that spreads the
segment's time over its characters by how long they take to say (a Chinese character about a
syllable, three Latin letters; a clause mark a short pause, a sentence end a longer one). Every
character of the text but spaces is in exactly one cue; cues never overlap and never pass the
end of their segment's audio.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from core.text.control_tokens import TOKEN_SHAPE
from core.text.sentences import is_cjk

MAX_LINE_CHARS = 42  # the common style guides' line (BBC, Netflix, EBU) for Latin scripts
MAX_LINE_CHARS_CJK = 16  # Netflix's for Simplified Chinese: a character is about a word
MAX_LINES = 2
MAX_CUE_S = 7.0  # longer than this, a reader has long finished: the cue is cut
MIN_CUE_S = 0.833  # 5/6 s: shorter cues flash by; a short sentence joins its neighbour
_SENTENCE_END = re.compile(r"[。！？!?；;…]+[\"'”’」』)]*|\.(?=\s|$)[\"'”’)]*")
_CLAUSE_END = re.compile(r"[，,、：:—–]+")
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class PlacedSegment:
    """A segment on the job's audio: `start`, `end` in seconds, its characters
    `text[begin:stop]`, and the engine's word times as (character in the text, seconds)."""

    start: float
    end: float
    begin: int
    stop: int
    words: tuple[tuple[int, float], ...] = field(default=())


@dataclass(frozen=True)
class Cue:
    start: float
    end: float
    begin: int  # the cue's characters: text[begin:end_char]
    end_char: int
    text: str  # as shown: control tokens out, spaces squeezed, cut into lines


def shown(text: str) -> str:
    """What a cue shows of its characters: no control tokens, single spaces."""
    return _SPACES.sub(" ", TOKEN_SHAPE.sub(" ", text)).strip()


def line_width(text: str) -> int:
    """Characters a line may hold for this text: Chinese lines are shorter."""
    cjk = sum(1 for ch in text if is_cjk(ch))
    letters = sum(1 for ch in text if ch.isalpha())
    return MAX_LINE_CHARS_CJK if cjk and 3 * cjk >= letters else MAX_LINE_CHARS


def wrap(text: str) -> str | None:
    """The text in at most two lines of its width, broken near the middle and after a clause
    mark where one is close; None when it does not fit."""
    width = line_width(text)
    if len(text) <= width:
        return text
    if len(text) > MAX_LINES * width + 1:
        return None
    best: tuple[float, int, int] | None = None  # (badness, cut, resume)
    for cut in range(1, len(text)):
        left, right = text[:cut].rstrip(), text[cut:].lstrip()
        if text[cut - 1] == " " or not left or not right:
            continue
        if text[cut] != " " and not (is_cjk(text[cut - 1]) or is_cjk(text[cut])):
            continue  # inside a Latin word
        if unicodedata.category(right[0]).startswith("P"):
            continue  # never open a line with punctuation
        if len(left) > width or len(right) > width:
            continue
        # Balanced lines, unless a clause mark is near enough: after it a line reads best.
        clause = _CLAUSE_END.match(left[-1]) or _SENTENCE_END.match(left[-1])
        badness = abs(len(left) - len(right)) - (width / 2 if clause else 0)
        if best is None or badness < best[0]:
            best = (badness, len(left), cut + (len(text[cut:]) - len(right)))
    if best is None:
        return None
    return f"{text[: best[1]]}\n{text[best[2] :]}"


def _weight(ch: str) -> float:
    """How long a character takes to say, roughly, in units of a Latin letter."""
    if is_cjk(ch):
        return 0.0 if unicodedata.category(ch).startswith("P") else 3.0
    if ch.isdigit():
        return 3.0  # a digit is read as a word ("1204": "twelve oh four")
    if ch.isalnum():
        return 1.0
    if _SENTENCE_END.fullmatch(ch) or ch in ".。":
        return 4.0
    if _CLAUSE_END.fullmatch(ch):
        return 2.0
    return 0.3 if ch.isspace() else 0.0


def _clock(text: str, segment: PlacedSegment) -> Callable[[int], float]:
    """Seconds at which character `i` of the segment is heard."""
    if segment.words:
        words = sorted(segment.words)

        def heard(i: int) -> float:
            at = next((s for c, s in words if c >= i), segment.end)
            return min(max(at, segment.start), segment.end)

        return heard
    times = spread(text[segment.begin : segment.stop], segment.start, segment.end)

    def estimated(i: int) -> float:
        return times[min(max(i - segment.begin, 0), len(times) - 1)]

    return estimated


def spread(text: str, start: float, end: float) -> list[float]:
    """When each character of `text` is heard if it is said from `start` to `end`, by how long
    each takes to say (a control token counts as spaces); one more time, the end, closes it."""
    spoken = TOKEN_SHAPE.sub(lambda m: " " * len(m.group(0)), text)
    totals = list(itertools.accumulate((_weight(ch) for ch in spoken), initial=0.0))
    whole = totals[-1] or 1.0
    return [start + (end - start) * total / whole for total in totals]


def _trim(text: str, begin: int, end: int) -> tuple[int, int]:
    while begin < end and text[begin].isspace():
        begin += 1
    while end > begin and text[end - 1].isspace():
        end -= 1
    return begin, end


def _cuts(pattern: re.Pattern[str], text: str, begin: int, end: int) -> list[int]:
    """Positions inside (begin, end) just after a match of `pattern`."""
    return [m.end() for m in pattern.finditer(text, begin, end) if begin < m.end() < end]


def _word_cuts(text: str, begin: int, end: int) -> list[int]:
    """Where a word starts (after a space, or at any Chinese character), outside tokens."""
    tokens = [(m.start(), m.end()) for m in TOKEN_SHAPE.finditer(text, begin, end)]
    cuts = []
    for i in range(begin + 1, end):
        if text[i].isspace() or any(a < i < b for a, b in tokens):
            continue
        if text[i - 1].isspace() or is_cjk(text[i]) or is_cjk(text[i - 1]):
            cuts.append(i)
    return cuts


def _next_word(text: str, at: int) -> int:
    """Where the next piece starts, whose start ends the piece before it."""
    while at < len(text) and text[at].isspace():
        at += 1
    return at


def _split(
    text: str, begin: int, end: int, heard: Callable[[int], float], last: bool, stop_s: float
) -> list[tuple[int, int]]:
    """The span cut until each piece fits two lines and MAX_CUE_S: at the clause mark, then the
    word boundary, that best balances the two halves' time."""
    begin, end = _trim(text, begin, end)
    if begin >= end:
        return []
    finish = stop_s if last else heard(_next_word(text, end))
    if wrap(shown(text[begin:end])) is not None and finish - heard(begin) <= MAX_CUE_S:
        return [(begin, end)]
    for cuts in (_cuts(_CLAUSE_END, text, begin, end), _word_cuts(text, begin, end)):
        cuts = [c for c in cuts if shown(text[begin:c]) and shown(text[c:end])]
        if cuts:
            middle = (heard(begin) + finish) / 2
            cut = min(cuts, key=lambda c: (abs(heard(c) - middle), abs(2 * c - begin - end)))
            return [
                *_split(text, begin, cut, heard, False, stop_s),
                *_split(text, cut, end, heard, last, stop_s),
            ]
    return [(begin, end)]  # one word longer than a cue: shown as it is


def segment_cues(text: str, segment: PlacedSegment) -> list[Cue]:
    """One segment's cues: its sentences, each cut to fit, short ones joined to a neighbour."""
    heard = _clock(text, segment)
    bounds = [segment.begin]
    bounds += _cuts(_SENTENCE_END, text, segment.begin, segment.stop)
    bounds.append(segment.stop)
    sentences = [_trim(text, a, b) for a, b in itertools.pairwise(bounds)]
    sentences = _attach_unspoken(text, [s for s in sentences if s[0] < s[1]])
    pieces: list[tuple[int, int]] = []
    for n, (a, b) in enumerate(sentences):
        pieces += _split(text, a, b, heard, n == len(sentences) - 1, segment.end)
    pieces = _attach_unspoken(text, pieces)
    pieces = _join_short(text, pieces, heard, segment.end)
    cues = []
    for n, (a, b) in enumerate(pieces):
        start = segment.start if n == 0 else heard(a)
        end = segment.end if n == len(pieces) - 1 else heard(pieces[n + 1][0])
        body = shown(text[a:b])
        cues.append(Cue(round(start, 3), round(max(end, start), 3), a, b, wrap(body) or body))
    return cues


def _attach_unspoken(text: str, pieces: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """A piece with nothing to show (control tokens, a lone mark) goes with its neighbour."""
    out: list[tuple[int, int]] = []
    for a, b in pieces:
        if out and not any(ch.isalnum() for ch in shown(text[a:b])):
            out[-1] = (out[-1][0], b)
            continue
        out.append((a, b))
    if len(out) > 1 and not any(ch.isalnum() for ch in shown(text[out[0][0] : out[0][1]])):
        out[1] = (out[0][0], out[1][1])
        out.pop(0)
    return out


def _join_short(
    text: str, pieces: list[tuple[int, int]], heard: Callable[[int], float], stop_s: float
) -> list[tuple[int, int]]:
    """A piece heard for less than MIN_CUE_S joins the shorter of its neighbours if the two fit."""

    def duration(i: int, items: list[tuple[int, int]]) -> float:
        end = stop_s if i == len(items) - 1 else heard(items[i + 1][0])
        return end - heard(items[i][0])

    def fits(a: int, b: int, end_s: float) -> bool:
        return wrap(shown(text[a:b])) is not None and end_s - heard(a) <= MAX_CUE_S

    items = list(pieces)
    i = 0
    while i < len(items):
        if len(items) > 1 and duration(i, items) < MIN_CUE_S:
            options = []
            for j in (i - 1, i + 1):
                if 0 <= j < len(items):
                    a, b = min(i, j), max(i, j)
                    end_s = stop_s if b == len(items) - 1 else heard(items[b + 1][0])
                    if fits(items[a][0], items[b][1], end_s):
                        options.append((duration(j, items), a, b))
            if options:
                _, a, b = min(options)
                items[a : b + 1] = [(items[a][0], items[b][1])]
                i = max(a - 1, 0)
                continue
        i += 1
    return items


@dataclass(frozen=True)
class TimedWord:
    word: str
    start: float
    end: float


def word_times(text: str, segment: PlacedSegment) -> list[TimedWord]:
    """The segment's words (runs without spaces; each Chinese character one), timed where the
    engine reported them and estimated like the cues where it did not."""
    heard = _clock(text, segment)
    starts = _word_cuts(text, segment.begin, segment.stop)
    first = _trim(text, segment.begin, segment.stop)[0]
    bounds = [first, *[c for c in starts if c > first], segment.stop]
    words = []
    for n, (a, b) in enumerate(itertools.pairwise(bounds)):
        word = shown(text[a:b])
        if not any(ch.isalnum() for ch in word):
            continue
        start = segment.start if n == 0 else heard(a)
        end = segment.end if b == segment.stop else heard(b)
        words.append(TimedWord(word, round(start, 3), round(max(end, start), 3)))
    return words


def align_words(
    piece: str, text: str, span: tuple[int, int], words: Sequence[tuple[int, int]]
) -> list[tuple[int, int]]:
    """Word starts given in a segment's own text (`piece`, the engine's) as characters of the
    job's `text`, whose `span` it is: matched by their non-space characters, which the cut
    keeps. Empty when the two differ (a normalized segment): its cues are then estimated."""
    begin, end = span
    mine = [i for i, ch in enumerate(piece) if not ch.isspace()]
    theirs = [i for i in range(begin, end) if not text[i].isspace()]
    if len(mine) != len(theirs) or any(
        piece[a] != text[b] for a, b in zip(mine, theirs, strict=False)
    ):
        return []
    rank = {at: n for n, at in enumerate(mine)}
    out = []
    for at, sample in words:
        n = next((rank[i] for i in range(at, len(piece)) if i in rank), None)
        if n is not None:
            out.append((theirs[n], sample))
    return out


def cues_of(text: str, segments: Sequence[PlacedSegment]) -> list[Cue]:
    """Every segment's cues, in order."""
    return [cue for segment in segments for cue in segment_cues(text, segment)]
