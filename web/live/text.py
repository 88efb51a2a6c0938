"""A live context's text not yet spoken: kept as it came, and cut into segments only as they are
needed, so that what the cutting costs follows the speech, however fast the text arrives."""

from __future__ import annotations

from collections import deque

from core.text.live_cuts import LiveCutter, ends_for_sure
from core.text.sentences import CLOSING_QUOTES, TERMINAL_MARKS

# Characters handed to the cutter at a time: a long message is cut piece by piece, each piece's
# work bounded, between the segments of the speech.
SLICE_CHARS = 256
# The end of the text kept to see whether it ends a sentence (the word before a full stop).
TAIL_CHARS = 64
_SENTENCE_ENDS = TERMINAL_MARKS + "."


class PendingText:
    """Pieces of text (and flush marks) in the order they came; `next()` cuts the next segment.
    A piece that ends a sentence for sure ("world.", "?") marks a flush at once: the segment is
    spoken without waiting for the token after it."""

    def __init__(self) -> None:
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
        if not self._cut:
            return None
        segment = self._cut.popleft()
        self._cut_chars -= len(segment)
        return segment
