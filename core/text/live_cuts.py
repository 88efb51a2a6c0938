"""Text that arrives in pieces (an LLM's tokens) cut into segments as soon as each is safe to
speak: at sentence ends, early at a clause mark for the first, at a word break when too long."""

from __future__ import annotations

import itertools
import re
import unicodedata
from dataclasses import dataclass

from core.text.control_tokens import TOKEN_SHAPE
from core.text.sentences import (
    CLAUSE_MARKS,
    CLOSING_QUOTES,
    TERMINAL_MARKS,
    clean_text,
    has_speakable,
    is_cjk,
)

# Live, a semicolon is a pause inside a sentence (a clause mark), as is a dash.
_SENTENCE_MARKS = TERMINAL_MARKS.replace(";", "").replace("；", "").replace("\n", "") + "."
_CLAUSE_MARKS = CLAUSE_MARKS + ";；—"
# A run of marks (and closing quotes after it) that may end a sentence or a clause.
_MARK_RUN = re.compile(
    rf"\n|[{re.escape(_SENTENCE_MARKS + _CLAUSE_MARKS)}]+[{re.escape(CLOSING_QUOTES)}]*"
)
# Marks that only end something before a space or a CJK character: "3.14", "1,000", "10:30",
# "e.g.", "a.b@c.com" and "https://x.y/?q=1" go on.
_ASCII_MARKS = frozenset(".,:;!?")
# Marks after which a lower-case word means the sentence goes on ("approx. five", "wait... no").
_SOFT_ENDS = frozenset(".…")
# A full stop after one of these is not a sentence end: titles and Latin abbreviations.
ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st mt vs etc approx fig eq vol cf ca dept est gen col lt sgt".split()  # noqa: SIM905
)
_DOTTED = re.compile(r"(?:[A-Za-z]{1,2}\.)+[A-Za-z]{1,2}")  # e.g, i.e, U.S, a.m, Ph.D
_LEADING_PUNCTUATION = "\"'“‘(「『["
# A control token still being written ("[uv_"): not text yet, never cut.
_TOKEN_START = re.compile(r"\[(?:[A-Za-z][A-Za-z0-9_]*)?$")
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")  # "3.14", "1,000.50", "10:30"
# What has nothing to say: control tokens and characters neither letters nor digits; and the
# same read backwards (to find the last speakable character of a text).
_UNSPOKEN = re.compile(rf"(?:{TOKEN_SHAPE.pattern}|[\W_])*")
_UNSPOKEN_BACKWARDS = re.compile(r"(?:\][A-Za-z0-9_]*[A-Za-z]\[|[\W_])*")
_INVISIBLE = frozenset({"Cc", "Cf", "Cs", "Co", "Cn"})
_SPACE = re.compile(r"\s*")
_TOKEN_MAX = 32  # ChatTTS's longest control token is 11 characters
SHORT_CHARS = 12  # a sentence this short ("Hi.") joins the next when that one is already here
# Characters looked at past max_chars to confirm a mark there (the word after a full stop).
_LOOKAHEAD = 64
# is_cjk's characters, as a pattern (counted in C).
_CJK = re.compile("[\u2e80-\u9fff\uf900-\ufaff]")


@dataclass(frozen=True)
class _Cut:
    at: int  # the segment is the buffer's text before this
    sentence: bool


class LiveCutter:
    """Feed text in pieces of any size; get back the segments that are safe to speak.

    The first segment is cut at the first clause mark after `first_chars` characters (a Chinese
    character counts as three, a syllable), or at a sentence end, whichever comes first; each
    later one's clause threshold is `grow` times the one before, up to `max_chars`. No segment
    is longer than `max_chars` (control tokens not counted) unless what follows has nothing to
    say; none is cut inside a number, a control token, an abbreviation or a URL; and all of
    them, with `flush()` at the end, hold every character of the text, cleaned, except a text
    with nothing speakable at all.
    """

    def __init__(self, first_chars: int = 40, max_chars: int = 200, grow: float = 2.0) -> None:
        if first_chars < 1 or max_chars < 1 or grow < 1.0:
            raise ValueError("first_chars and max_chars must be positive and grow at least 1")
        self.first_chars, self.max_chars, self.grow = first_chars, max_chars, grow
        self._buffer = ""  # cleaned as it arrives: no invisible characters, spaces squeezed
        self._cuts = 0
        self._reset_bounds()

    def _reset_bounds(self) -> None:
        # What is known of the buffer, so that each piece fed is read once: it has nothing to
        # say before `_quiet`; its last speakable character before `_seen` is at `_last`.
        self._quiet, self._seen, self._last = 0, 0, -1
        # The bounds at the last call that found no cut: a cut needs speakable text after it, so
        # nothing new can be cut until they move (text with nothing to say waits for that).
        self._stuck = (-1, -1)

    @property
    def pending(self) -> str:
        """The text received and not yet returned (cleaned: spaces squeezed, line breaks kept)."""
        return self._buffer

    def clear(self) -> None:
        """Drop the pending text; the next segment is a first one again (cut early)."""
        self._buffer, self._cuts = "", 0
        self._reset_bounds()

    def feed(self, text: str) -> list[str]:
        """Add text; the segments now safe to speak, in order (often none)."""
        self._take(text)
        out = []
        while (cut := self._next_cut()) is not None:
            out.append(self._emit(cut))
        return out

    def flush(self) -> list[str]:
        """Everything pending, as segments cut at `max_chars`; nothing is left pending."""
        out = []
        while (cut := self._next_cut(final=True)) is not None:
            out.append(self._emit(cut))
        rest, self._buffer = clean_text(self._buffer), ""
        self._reset_bounds()
        if has_speakable(TOKEN_SHAPE.sub("", rest)):
            out.append(rest)
            self._cuts += 1
        return out

    def _take(self, text: str) -> None:
        """Append text cleaned as clean_text would, but keeping line breaks (they end sentences)."""
        kept: list[str] = []
        last = self._buffer[-1:]
        for ch in text:
            if ch in "\n\r":
                ch = "\n"
            elif ch == "\t":
                ch = " "
            elif unicodedata.category(ch) in _INVISIBLE:
                continue
            elif ch.isspace():
                ch = " "
            if ch in " \n" and last in ("", " ", "\n"):
                if ch == "\n" and last == " ":  # spaces squeezed; a line break wins over them
                    if kept:
                        kept[-1] = ch
                    else:
                        self._buffer = self._buffer[:-1] + ch
                    last = ch
                continue
            kept.append(ch)
            last = ch
        self._buffer += "".join(kept)

    def _emit(self, at: int) -> str:
        segment = clean_text(self._buffer[:at])
        self._buffer = self._buffer[at:].lstrip()
        self._cuts += 1
        self._reset_bounds()
        return segment

    def _next_cut(self, final: bool = False) -> int | None:
        """Where the next segment ends, if that is known yet. A cut must leave something to say
        on both sides: after the first speakable character, at or before the last one."""
        first, last = self._speakable_bounds(final)
        if last <= first or (not final and (first, last) == self._stuck):
            return None
        if (cut := self._find_cut(first, last, final)) is None:
            self._stuck = (first, last)
        return cut

    def _find_cut(self, first: int, last: int, final: bool) -> int | None:
        # Only the text up to max_chars (and a little after, to confirm a mark) can hold the
        # next cut: looking no further keeps each cut's work bounded, so that a long message
        # costs time in proportion to its length, not to its length squared.
        full = self._buffer
        limit = _limit(full, self.max_chars)
        over = limit < len(full) and not full[limit:].isspace()
        text = full[: limit + _LOOKAHEAD] if over else full
        if not over:
            limit = len(full)
        marks = self._marks(text, limit)
        if not final:
            threshold = min(self.first_chars * self.grow**self._cuts, self.max_chars)
            cuts: list[_Cut] = []
            for cut in marks:
                if first < cut.at <= last and (
                    cut.sentence or _spoken_size(text[: cut.at]) >= threshold
                ):
                    cuts.append(cut)
                    if len(cuts) == 2:
                        break
            if cuts:
                short = cuts[0].sentence and _spoken_size(text[: cuts[0].at]) < SHORT_CHARS
                # A short sentence joins the next one when that one is here, never waits for it.
                return cuts[1].at if short and len(cuts) > 1 else cuts[0].at
        if not over:
            return None
        within = [c.at for c in marks if first < c.at <= min(last, limit)]
        return self._overflow_cut(within, first, last, limit, final)

    def _speakable_bounds(self, final: bool) -> tuple[int, int]:
        """Where the first and the last speakable characters are (a control token still being
        written is not text, unless the text is `final`); (len, -1) when there are none."""
        text = self._buffer
        if final:
            return _skip(_UNSPOKEN, text), len(text) - _skip(_UNSPOKEN_BACKWARDS, text[::-1]) - 1
        stable = _start_of_unfinished_token(text, self._quiet)
        first = _skip(_UNSPOKEN, text, self._quiet)
        self._quiet = min(first, stable)
        if first >= stable:
            return len(text), -1
        if stable > self._seen:
            fresh = text[self._seen : stable]
            found = len(fresh) - _skip(_UNSPOKEN_BACKWARDS, fresh[::-1]) - 1
            if found >= 0:
                self._last = self._seen + found
            self._seen = stable
        return first, self._last

    def _marks(self, text: str, limit: int) -> list[_Cut]:
        """The sentence and clause ends of `text` (the buffer's start) before `limit` that the
        text after them confirms."""
        cuts = []
        for match in _MARK_RUN.finditer(text):
            run, end = match.group(0), match.end()
            if end >= len(text) or end > limit:
                break  # what follows decides: "3." may be "3.14", "Hi" may be "Hi!"
            marks = run.rstrip(CLOSING_QUOTES) or run
            after = text[end]
            if marks[-1] in _ASCII_MARKS and not (after.isspace() or is_cjk(after)):
                continue
            sentence = marks == "\n" or any(ch in _SENTENCE_MARKS for ch in marks)
            if sentence and set(marks) <= _SOFT_ENDS:
                following = _skip(_SPACE, text, end)
                if following >= len(text):
                    break  # the next word decides
                if text[following].islower() or (marks == "." and _abbreviation(text, match)):
                    continue
            cuts.append(_Cut(end, sentence))
        return cuts

    def _overflow_cut(
        self, marks: list[int], first: int, last: int, limit: int, final: bool
    ) -> int | None:
        """Too long: at the last clause mark, else word break, within max_chars (in a word longer
        than that if need be); past it only when nothing before it can be said."""
        text = self._buffer
        if marks and _size(text[: marks[-1]]) >= SHORT_CHARS:
            return marks[-1]
        whole = _whole_spans(text, final, last)

        def breakable(at: int) -> bool:
            return _is_break(text, at) and not any(a < at < b for a, b in whole)

        for at in range(min(last, limit), first, -1):
            if breakable(at):
                return at
        hard = next((a for a, b in whole if a < limit < b and a > 0), limit)
        if first < hard <= last:
            return hard
        return next((at for at in range(max(first, limit) + 1, last + 1) if breakable(at)), None)


def _size(text: str) -> int:
    """Characters a segment of this text holds, control tokens not counted."""
    return len(TOKEN_SHAPE.sub("", text).strip())


def _spoken_size(text: str) -> int:
    """How long the text takes to say, in Latin letters: a Chinese character is a syllable,
    about three letters (so that a first segment is cut as early in Mandarin as in English)."""
    return _size(text) + 2 * len(_CJK.findall(text))


def _limit(text: str, max_chars: int) -> int:
    """How much of the text max_chars characters are, control tokens not counted."""
    count = at = 0
    while at < len(text):
        token = TOKEN_SHAPE.match(text, at) if text[at] == "[" else None
        if token:
            at = token.end()
            continue
        count += 1
        if count > max_chars:
            return at
        at += 1
    return len(text)


def _start_of_unfinished_token(text: str, since: int = 0) -> int:
    """Where a control token still being written ("[uv_") starts; the text's end if none (one
    longer than _TOKEN_MAX characters is not a control token)."""
    unfinished = _TOKEN_START.search(text, max(since, len(text) - _TOKEN_MAX))
    return unfinished.start() if unfinished else len(text)


def _skip(pattern: re.Pattern[str], text: str, start: int = 0) -> int:
    """Where the pattern's match from `start` ends."""
    match = pattern.match(text, start)
    return match.end() if match else start


def _whole_spans(text: str, final: bool, upto: int) -> list[tuple[int, int]]:
    """What is never cut, up to `upto`: control tokens (one still being written too), numbers."""
    spans: list[tuple[int, int]] = []
    for pattern in (TOKEN_SHAPE, _NUMBER):
        spans += itertools.takewhile(
            lambda span: span[0] <= upto, map(re.Match.span, pattern.finditer(text))
        )
    if not final and (start := _start_of_unfinished_token(text)) < len(text):
        spans.append((start, len(text)))
    return spans


def _is_break(text: str, at: int) -> bool:
    """A word starts here: after a space, or at or after a CJK character."""
    return at < len(text) and (
        text[at].isspace() or text[at - 1].isspace() or is_cjk(text[at]) or is_cjk(text[at - 1])
    )


def _abbreviation(text: str, match: re.Match[str]) -> bool:
    """The full stop of this match ends an abbreviation, an initial or a list number."""
    before = text[: match.start()]
    word = before.rsplit(None, 1)[-1] if before and not before[-1].isspace() else ""
    word = word.lstrip(_LEADING_PUNCTUATION)
    if word.lower() in ABBREVIATIONS or _DOTTED.fullmatch(word):
        return True
    if len(word) == 1 and word.isupper() and word != "I":  # an initial: "J. K. Rowling"
        return True
    # "1. First": a number that opens a line or a sentence numbers a list item.
    opening = before[: -len(word)].rstrip(" ")
    return word.isdigit() and (
        not opening or opening[-1] in _SENTENCE_MARKS + CLOSING_QUOTES + "\n"
    )


# Marks that end a sentence whatever follows them.
_FINAL_MARKS = frozenset("!?。！？\n")
_LAST_WORD = re.compile(r"(\S+)\.$")


def ends_for_sure(text: str) -> bool:
    """True when `text` ends a sentence whatever comes next: a final mark ("?", "。", a line
    break), or a full stop after a word that is no number, initial or abbreviation ("world."
    ends; "3." may be "3.14", "Dr." goes on). What an LLM's answer is cut at the moment its
    full stop arrives, not one token later."""
    stripped = text.rstrip(" ")
    if stripped.endswith("\n"):
        return True
    core = stripped.rstrip(CLOSING_QUOTES)
    if not core:
        return False
    if core[-1] in _FINAL_MARKS:
        return True
    if core[-1] != "." or core.endswith(".."):
        return False
    found = _LAST_WORD.search(core)
    word = found.group(1).lstrip(_LEADING_PUNCTUATION) if found else ""
    return len(word) >= 2 and word.isalpha() and word.lower() not in ABBREVIATIONS
