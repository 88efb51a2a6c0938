"""A job's text as ChatTTS segments: sentences as submitted, each spelled out in its language,
cut again where spelling made one too long."""

from __future__ import annotations

from core.queue.job import SynthesisRequest
from core.queue.voice_names import is_derived, language_of
from core.text.normalize import normalize
from core.text.sentences import locate, split_sentences
from workers.engines.base import EngineError, Pieces

# Segment lengths that stay well inside MAX_NEW_TOKEN: 120 Mandarin characters take about 27 s
# at 4.5 syllables per second, 200 English characters about 13 s.
SEGMENT_CHARS_CJK = 120
SEGMENT_CHARS_LATIN = 200


def language(voice: str, registered: str | None = None, text: str = "") -> str:
    """The normalizer's language: a built-in voice's (a seed's or blend's: by the text), else the
    registered voice's, else zh."""
    if is_derived(voice):
        return language_of(voice, text)
    tag = registered or "zh"
    return "en" if tag.lower().startswith("en") else "zh"


def pieces(text: str, request: SynthesisRequest, registered: str | None = None) -> Pieces:
    """The text cut into sentences as submitted, each normalized on its own (so that each
    segment knows its characters), cut again where spelling made it too long."""
    lang = language(request.voice, registered, text)
    cjk = sum(1 for ch in text if "\u4e00" <= ch <= "\u9fff")
    limit = SEGMENT_CHARS_CJK if cjk * 2 > len(text) else SEGMENT_CHARS_LATIN
    out: Pieces = []
    for start, end in locate(text, split_sentences(text, limit)):
        normalized = normalize(text[start:end], lang, spell=request.normalize)
        out.extend((piece, start, end) for piece in split_sentences(normalized, limit))
    if not out:
        raise EngineError("the text holds nothing ChatTTS can speak", retryable=False)
    return out
