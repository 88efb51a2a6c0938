"""Text hygiene shared by the web tier and the engines: invisible characters out, sentences cut."""

from __future__ import annotations

import re
import unicodedata

from core.text.control_tokens import TOKEN_SHAPE

# Unicode categories that carry no speech: controls, format characters (zero-width, bidi
# overrides), surrogates, private use, unassigned.
_INVISIBLE = frozenset({"Cc", "Cf", "Cs", "Co", "Cn"})
_SPACES = re.compile(r"\s+")
# A sentence ends after Chinese or Western terminal punctuation (and any closing quotes after
# it), or after a full stop followed by a space.
TERMINAL_MARKS = "。！？!?；;…\n"
CLOSING_QUOTES = "\"'”’」』)"
_SENTENCE_END = re.compile(
    rf"(?<=[{re.escape(TERMINAL_MARKS)}])[{re.escape(CLOSING_QUOTES)}]*|(?<=\.)(?=\s)"
)
# Inside a long sentence: clause punctuation where a cut sounds natural.
CLAUSE_MARKS = "，,、：:"
_CLAUSE_END = re.compile(rf"(?<=[{re.escape(CLAUSE_MARKS)}])")
# The units a clause is cut into when it has no clause punctuation left: a control token
# ("[uv_break]", never cut), a CJK character, or a run without spaces (and its spaces).
_TAG = TOKEN_SHAPE.pattern
_WORD = re.compile(rf"{_TAG}\s*|[\u3000-\u9fff\uf900-\ufaff]|(?:(?!{_TAG})\S)+\s*")


def clean_text(text: str) -> str:
    """Drop invisible and control characters (line breaks become spaces) and squeeze whitespace."""
    kept = []
    for ch in text:
        if ch in "\n\r\t":
            kept.append(" ")
        elif unicodedata.category(ch) not in _INVISIBLE:
            kept.append(ch)
    return _SPACES.sub(" ", "".join(kept)).strip()


def has_speakable(text: str) -> bool:
    """True when the text holds at least one letter or digit (in any script)."""
    return any(unicodedata.category(ch)[0] in "LN" for ch in text)


def sentence_ends(text: str) -> list[int]:
    """Where each sentence of `text` ends (after its terminal mark and closing quotes), in order;
    the text's own end last."""
    ends = [match.end() for match in _SENTENCE_END.finditer(text) if 0 < match.end() < len(text)]
    return [*dict.fromkeys(ends), len(text)]


def split_sentences(text: str, max_chars: int = 200) -> list[str]:
    """Cut text into segments of at most `max_chars`, at sentence, then clause, then word breaks.

    Short sentences are merged up to `max_chars`; a word (a run without spaces in Western text)
    is never cut unless it alone exceeds `max_chars`. A control token ("[uv_break]", "[laugh]")
    is never cut, and never a segment of its own: it stays with the text before it (the text
    after it when it opens the text), even where that makes a segment longer than `max_chars`.
    """
    sentences = [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]
    pieces: list[str] = []
    for sentence in sentences:
        pieces.extend(_cut_long(sentence, max_chars))
    segments: list[str] = []
    for piece in pieces:
        if segments and len(segments[-1]) + 1 + len(piece) <= max_chars:
            segments[-1] = _join(segments[-1], piece)
        else:
            segments.append(piece)
    return [s for s in _attach_tokens(segments) if has_speakable(TOKEN_SHAPE.sub("", s))]


def _attach_tokens(segments: list[str]) -> list[str]:
    """Segments that hold control tokens and nothing to speak joined to a neighbour."""
    out: list[str] = []
    pending = ""  # tokens that opened the text, waiting for the first speakable segment
    for segment in segments:
        if has_speakable(TOKEN_SHAPE.sub("", segment)):
            out.append(_join(pending, segment) if pending else segment)
            pending = ""
        elif out:
            out[-1] = _join(out[-1], segment)
        else:
            pending = _join(pending, segment) if pending else segment
    if pending:  # nothing speakable at all
        out.append(pending)
    return out


def _join(left: str, right: str) -> str:
    return left + ("" if is_cjk(left[-1]) or is_cjk(right[0]) else " ") + right


def _cut_long(sentence: str, max_chars: int) -> list[str]:
    if len(sentence) <= max_chars:
        return [sentence]
    out: list[str] = []
    for clause in (c.strip() for c in _CLAUSE_END.split(sentence)):
        if not clause:
            continue
        if out and len(out[-1]) + len(clause) + 1 <= max_chars:
            out[-1] = f"{out[-1]} {clause}" if not is_cjk(clause[0]) else out[-1] + clause
        elif len(clause) <= max_chars:
            out.append(clause)
        else:
            out.extend(_cut_words(clause, max_chars))
    return out


def _cut_words(clause: str, max_chars: int) -> list[str]:
    out: list[str] = []
    current = ""
    for token in _WORD.findall(clause):
        if len(current) + len(token) > max_chars and current:
            out.append(current.strip())
            current = ""
        # A single overlong "word": cut it, nothing else works (a control token stays whole).
        while len(token) > max_chars and not TOKEN_SHAPE.match(token):
            out.append(token[:max_chars])
            token = token[max_chars:]
        current += token
    if current.strip():
        out.append(current.strip())
    return out


def is_cjk(ch: str) -> bool:
    """Chinese, Japanese and Korean characters and their punctuation: no spaces around them."""
    return "\u2e80" <= ch <= "\u9fff" or "\uf900" <= ch <= "\ufaff" or "\u3000" <= ch <= "\u303f"


def locate(text: str, pieces: list[str]) -> list[tuple[int, int]]:
    """Where each piece of `split_sentences(text)` lies in `text`: (start, end) character
    offsets, in order. Pieces are the text's own characters, cut and rejoined with single
    spaces or none, so they are matched in order with whitespace ignored on both sides."""
    spans: list[tuple[int, int]] = []
    pos = 0
    for piece in pieces:
        wanted = [ch for ch in piece if not ch.isspace()]
        while pos < len(text) and text[pos].isspace():
            pos += 1
        start = found = pos
        matched = 0
        while matched < len(wanted) and found < len(text):
            if text[found] == wanted[matched]:
                matched += 1
            elif not text[found].isspace():
                # Not this piece's text here (a piece dropped before it): from the next start.
                start, matched = start + 1, 0
                found = start
                continue
            found += 1
        if matched < len(wanted):
            spans.append((start, start))  # not found: an empty span, never a wrong one
            continue
        spans.append((start, found))
        pos = found
    return spans
