"""A live context's text not yet spoken: kept as it came, and cut into segments only as they are
needed, so that what the cutting costs follows the speech, however fast the text arrives."""

from __future__ import annotations

from collections import deque

from core.infra.sections import LimitSettings
from core.text.live_cuts import LiveCutter, ends_for_sure
from core.text.sentences import CLOSING_QUOTES, TERMINAL_MARKS
from web.errors import ApiError
from web.monitors.memory import MemoryBudget

# Characters handed to the cutter at a time: a long message is cut piece by piece, each piece's
# work bounded, between the segments of the speech.
SLICE_CHARS = 256
# The end of the text kept to see whether it ends a sentence (the word before a full stop).
TAIL_CHARS = 64
_SENTENCE_ENDS = TERMINAL_MARKS + "."
# What a character of text waiting costs the process, about (a str of CJK text takes 2-4 bytes
# a character, and the cutter's copies as much again).
CHAR_BYTES = 4


class PendingText:
    """Pieces of text (and flush marks) in the order they came; `next()` cuts the next segment.
    A piece that ends a sentence for sure ("world.", "?") marks a flush at once: the segment is
    spoken without waiting for the token after it. With a `memory` budget, the text waiting
    counts in it under `source` (like a request's body) until it is handed out."""

    def __init__(self, memory: MemoryBudget | None = None, source: str = "") -> None:
        self._memory, self._source = memory, source
        self.charged = 0  # bytes of the text waiting, counted in the memory budget
        self.cutter = LiveCutter()
        self._pieces: deque[str | None] = deque()  # None: a flush mark
        self._piece_chars = 0
        self._cut: deque[str] = deque()
        self._cut_chars = 0
        self._tail = ""

    @property
    def chars(self) -> int:
        """Characters received and not yet handed out as segments."""
        return self._piece_chars + len(self.cutter.pending) + self._cut_chars

    @property
    def waiting(self) -> bool:
        """Text or a flush is waiting to be cut (a segment may be ready)."""
        return bool(self._pieces or self._cut)

    def add(self, text: str, flush: bool = False) -> None:
        if self._memory is not None:
            self._memory.take(self._source, len(text) * CHAR_BYTES, "a live session's text")
            self.charged += len(text) * CHAR_BYTES
        for at in range(0, len(text), SLICE_CHARS):
            self._pieces.append(text[at : at + SLICE_CHARS])
        self._piece_chars += len(text)
        self._tail = (self._tail + text)[-TAIL_CHARS:]
        if flush or ends_for_sure(self._tail):
            self.flush()

    def flush(self) -> None:
        """Everything received so far is spoken, finished or not."""
        if not self._pieces or self._pieces[-1] is not None:
            self._pieces.append(None)

    def may_end_a_sentence(self) -> bool:
        """The text ends with a mark that may end a sentence ("It costs 3.": or "3.14"?)."""
        marks = self._tail.rstrip().rstrip(CLOSING_QUOTES)
        return bool(marks) and marks[-1] in _SENTENCE_ENDS

    def clear(self) -> None:
        self.cutter.clear()
        self._pieces.clear()
        self._cut.clear()
        self._piece_chars = self._cut_chars = 0
        self._tail = ""
        self._recharge()

    def _recharge(self) -> None:
        """Count what waits now (the cutter cleans text: it may hold less than was fed)."""
        held = self.chars * CHAR_BYTES
        if self._memory is not None and held < self.charged:
            self._memory.give(self._source, self.charged - held)
            self.charged = held

    def next(self) -> str | None:
        """The next segment, if one is known yet."""
        while not self._cut and self._pieces:
            piece = self._pieces.popleft()
            if piece is None:
                found = self.cutter.flush()
            else:
                self._piece_chars -= len(piece)
                found = self.cutter.feed(piece)
            self._cut.extend(found)
            self._cut_chars += sum(map(len, found))
        segment = self._cut.popleft() if self._cut else None
        self._cut_chars -= len(segment or "")
        self._recharge()
        return segment


def check_more(limits: LimitSettings, chars: int, received: int, pending: int) -> None:
    """Refuse a text message of `chars` characters to a context that received `received` and
    holds `pending` not yet spoken: too long a message (413), past the context's life (413), or
    too far ahead of its speech (429: wait for its audio)."""
    if chars > limits.live_message_chars:
        raise ApiError(
            413,
            f"at most {limits.live_message_chars} characters per text message; send the text in "
            "smaller pieces",
            code="message_too_long",
            param="text",
        )
    if received + chars > limits.live_context_chars:
        raise ApiError(
            413,
            f"a context takes at most {limits.live_context_chars} characters over its life: "
            "close it and open a new one",
            code="context_too_long",
            param="text",
        )
    if pending + chars > limits.live_pending_chars:
        raise ApiError(
            429,
            f"this context holds {pending} characters not yet spoken (at most "
            f"{limits.live_pending_chars}): wait for its audio before sending more",
            code="text_ahead_of_speech",
            param="text",
        )
