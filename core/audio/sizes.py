"""How many bytes a job's audio will take, estimated from its request before it runs: what
storage admission charges a client at submit (web/job_service.py), corrected when it ends."""

from __future__ import annotations

import re
from functools import lru_cache

from core.audio.catalog import JOINED_FORMATS
from core.audio.formats import SAMPLE_RATE
from core.text.control_tokens import PAUSE_MS, TOKEN_SHAPE

# Speaking rates at the slow end, so that an estimate errs on the large side: ChatTTS and eSpeak
# read Mandarin at 4-6 characters a second, and other scripts at 12-18.
CJK_CHARS_PER_S = 4.0
OTHER_CHARS_PER_S = 12.0
_CJK = re.compile(r"[\u3000-\u9fff\uac00-\ud7af\uf900-\ufaff]")
# Characters read out as words: a digit is up to a second of speech ("$999,999,999" is nine
# hundred and ninety-nine million...: about half a second a digit in English and Mandarin), a
# symbol a word or two ("%", "&", "€", an emoji's name). Letters, spaces and punctuation are not.
DIGIT_S = 0.6
SYMBOL_S = 0.8
_DIGITS = re.compile(r"\d")
_SYMBOLS = re.compile(r"[^\w\s.,;:!?'\"()\[\]\-–—…，。、；：！？“”‘’（）《》]")
# Bytes per second of speech in each format: 16-bit PCM at 24 kHz, and the encoders' rates with
# room to spare (FLAC about two thirds of PCM; the lossy ones at most 128 kbit/s).
BYTES_PER_S = {
    "wav": 2 * SAMPLE_RATE,
    "pcm": 2 * SAMPLE_RATE,
    "flac": 2 * SAMPLE_RATE * 2 // 3,
    "mp3": 16_000,
    "opus": 16_000,
    "ogg": 16_000,
    "aac": 16_000,
}


# The least a stream is charged for, in seconds of speech: an engine's lead-in and tail, a word
# read out letter by letter ("â)" is a second of eSpeak NG's speech; its estimate, 0.1 s).
MIN_STREAM_S = 5.0


@lru_cache(maxsize=4)  # asked twice per submission (its storage, its lane's cost); texts are long
def speech_seconds(text: str) -> float:
    """Seconds of speech `text` should make: its characters at a slow rate, and its pause
    tokens at their lengths."""
    pauses = sum(PAUSE_MS.get(token, 0) for token in TOKEN_SHAPE.findall(text)) / 1000
    spoken = TOKEN_SHAPE.sub("", text)
    cjk = len(_CJK.findall(spoken))
    digits = len(_DIGITS.findall(spoken))
    symbols = len(_SYMBOLS.findall(spoken))
    others = len(spoken) - cjk - digits - symbols
    words = digits * DIGIT_S + symbols * SYMBOL_S
    return cjk / CJK_CHARS_PER_S + others / OTHER_CHARS_PER_S + words + pauses


def expected_bytes(text: str, fmt: str, document: bool, speed: float = 1.0) -> int:
    """Bytes the job keeps: its file, and its segments, one copy more; a document its PCM parts
    and, in a format other than wav or pcm, its file encoded from them. `speed` 0.5 reads it in
    twice the time."""
    seconds = speech_seconds(text) / speed
    size = seconds * BYTES_PER_S.get(fmt, 2 * SAMPLE_RATE)
    if not document:
        return int(2 * size)
    return int(seconds * BYTES_PER_S["pcm"] + (0 if fmt in JOINED_FORMATS else size))


def stream_bytes(text: str, speed: float = 1.0) -> int:
    """Bytes a streamed job's chunks keep in Redis: its speech as 16-bit PCM, MIN_STREAM_S of
    it at least (what a stream charged less than it writes may be stopped, when its client's
    or the queue's room for streams is full by then)."""
    return int(max(MIN_STREAM_S, speech_seconds(text) / speed) * BYTES_PER_S["pcm"])
