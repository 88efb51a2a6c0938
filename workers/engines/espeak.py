"""eSpeak NG through `espeakng-loader` (ctypes): real speech on any CPU in milliseconds, no weights.

The library speaks in a process of its own, each segment in a fresh fork of it
(workers/engines/espeak_speaker.py): the same text in the same voice is the same samples on every
worker, whatever it spoke before.

ChatTTS's control tokens in a text (core/text/control_tokens.py) are never read aloud: a break
token is a pause of `PAUSE_MS` ([uv_break] 150 ms, [v_break] 300, [lbreak] 600, [llbreak] 1000,
[break_N] N x 100), silence inserted where the next word starts (eSpeak's word events say where
that is in the audio), on top of eSpeak's own pauses and whatever the speed; every other token
([laugh], [oral_2] ...) is dropped.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from core.infra.settings import Settings
from core.queue.job import SynthesisRequest
from core.queue.voice_names import language_of, seed_of
from core.queue.voices import BUILTIN_VOICES, Voice
from core.text.control_tokens import PAUSE_MS, TOKEN_SHAPE
from core.text.sentences import is_cjk, locate, split_sentences
from workers.engines.base import (
    SAMPLE_RATE,
    Capabilities,
    ChunkSink,
    Engine,
    EngineError,
    Pieces,
    Segment,
)
from workers.engines.batching import Batched
from workers.engines.espeak_speaker import Speaker, SpeakerError

_DEFAULT_WPM = 175  # eSpeak's default speaking rate; `speed` scales it
# eSpeak voice (language + variant) and base pitch (0-100) per built-in voice name.
_VOICE_TABLE: dict[str, tuple[bytes, int]] = {
    "zh_female": (b"cmn+f3", 55),
    "zh_male": (b"cmn+m3", 45),
    "en_female": (b"en-us+f3", 55),
    "en_male": (b"en-us+m3", 45),
    "zh_female_2": (b"cmn+f4", 65),
    "zh_male_2": (b"cmn+m1", 35),
    "en_female_2": (b"en+f4", 60),  # espeak-ng's "en" is British English
    "en_male_2": (b"en+m1", 35),
}
# A seed voice (core/queue/voice_names.py) is a variant and a pitch drawn from its seed, in the
# text's language: the same seed is the same voice on every worker. (eSpeak NG's variants: f1-f5,
# m1-m7, in this order.)
_SEED_VARIANTS = tuple(
    f"{kind}{n}".encode() for kind, count in (("f", 5), ("m", 7)) for n in range(1, count + 1)
)
_SEED_LANGUAGES = {"zh": b"cmn", "en": b"en-us"}


def _voice(name: str, text: str) -> tuple[bytes, int]:
    """eSpeak NG's voice name and base pitch for a request's voice."""
    builtin = _VOICE_TABLE.get(name)
    if builtin is not None:
        return builtin
    seed = seed_of(name)
    if seed is None:  # refused before it reaches an engine (workers/intake.py)
        raise EngineError(f"eSpeak NG speaks built-in and seed voices, not {name!r}")
    variant = _SEED_VARIANTS[seed % len(_SEED_VARIANTS)]
    language = _SEED_LANGUAGES[language_of(name, text)]
    return language + b"+" + variant, 30 + (seed // len(_SEED_VARIANTS)) % 41


# Segments long enough to stream progress on long texts, short enough to start playing soon.
_SEGMENT_CHARS = 200

# Ramps either side of an inserted pause (4 ms): a cut between two words never clicks.
_FADE = SAMPLE_RATE * 4 // 1000


def create(settings: Settings) -> Engine:
    """The engine registry's entry: eSpeak NG served a segment at a time."""
    return Batched(EspeakEngine(settings))


class EspeakEngine:
    name = "espeak"
    sample_rate = SAMPLE_RATE
    max_batch = 1  # eSpeak synthesizes one text at a time; batching would only add latency
    # Its voices are its own (a registered ChatTTS voice is refused); same text and voice, same
    # samples (results may be cached); a segment takes milliseconds, so it goes out whole.
    capabilities = Capabilities(
        knobs=frozenset({"speed"}),
        streaming="segments",
        alignment=True,
        deterministic=True,
    )

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.model_version = "espeak-ng"
        self._speaker: Speaker | None = None

    def load(self) -> None:
        speaker = Speaker()
        try:
            speaker.start()
        except SpeakerError as exc:
            raise EngineError(str(exc)) from exc
        self.model_version = f"espeak-ng-{speaker.version}"
        self._speaker = speaker

    def warmup(self) -> None:
        for request in (
            SynthesisRequest(text="你好", voice="zh_female"),
            SynthesisRequest(text="Hello", voice="en_female"),
        ):
            self.synthesize([Segment("warmup", 0, request.text, request)])

    def stats(self) -> dict[str, Any]:
        return {}

    def voices(self) -> list[Voice]:
        return [v for v in BUILTIN_VOICES if v.name in _VOICE_TABLE]

    def pieces(self, text: str, request: SynthesisRequest, language: str | None = None) -> Pieces:
        segments = split_sentences(text, _SEGMENT_CHARS)
        return [(s, a, b) for s, (a, b) in zip(segments, locate(text, segments), strict=True)]

    def batch_key(self, request: SynthesisRequest) -> Hashable:
        return (request.voice, request.speed)

    def synthesize(
        self, segments: list[Segment], on_chunk: ChunkSink | None = None
    ) -> list[np.ndarray]:
        if self._speaker is None:
            raise EngineError("the espeak engine was not loaded")
        out = []
        for segment in segments:  # a segment takes milliseconds: it goes out whole
            samples = self._one(segment)
            if on_chunk is not None:
                on_chunk(segment, samples, True)
            out.append(samples)
        return out

    def _one(self, segment: Segment) -> np.ndarray:
        assert self._speaker is not None
        voice, pitch = _voice(segment.request.voice, segment.text)
        text, pauses = speech_text(segment.text)
        rate = int(_DEFAULT_WPM * segment.request.speed)
        try:
            data, events = self._speaker.speak(voice, rate, pitch, text)
        except SpeakerError as exc:
            raise EngineError(str(exc), retryable=exc.died) from exc
        pcm = np.frombuffer(data, np.int16)
        words = [(at - 1, ms) for at, ms in events]  # 0-based characters
        native_rate = self._speaker.native_rate
        audio = _resample(pcm.astype(np.float32) / 32768.0, native_rate, SAMPLE_RATE)
        silences: dict[int, int] = {}
        if pauses:
            audio, silences = _insert_pauses(audio, pauses, words)
        # The words' times, for subtitle cues: characters of the segment's own text, samples
        # of its audio (the pauses inserted before a word moving it on).
        original = _original_positions(segment.text)
        for at, ms in words:
            # (eSpeak also reports parts of a word it reads as two, "to" in "has to be": only
            # a word's first character starts a word here)
            if 0 <= at < len(original) and _word_start(segment.text, original[at]):
                sample = round(ms * SAMPLE_RATE / 1000)
                sample += sum(n for cut, n in silences.items() if cut <= sample)
                segment.words.append((original[at], min(sample, audio.size)))
        return audio


def speech_text(text: str) -> tuple[str, list[tuple[int, int]]]:
    """The text eSpeak NG reads (every control token a space) and its pauses: (the character
    where a break token stood, its milliseconds)."""
    out: list[str] = []
    pauses: list[tuple[int, int]] = []
    length = pos = 0
    for match in TOKEN_SHAPE.finditer(text):
        out.append(text[pos : match.start()])
        length += match.start() - pos
        pause = PAUSE_MS.get(match.group(0), 0)
        if pause:
            pauses.append((length, pause))
        out.append(" ")  # the words on each side stay apart
        length += 1
        pos = match.end()
    out.append(text[pos:])
    return "".join(out), pauses


def _word_start(text: str, at: int) -> bool:
    before = text[at - 1] if at > 0 else " "
    return not before.isalnum() or not text[at].isalnum() or is_cjk(before) or is_cjk(text[at])


def _original_positions(text: str) -> list[int]:
    """For each character of `speech_text(text)`, where it stands in `text` (a token's one
    space, at the token)."""
    positions: list[int] = []
    pos = 0
    for match in TOKEN_SHAPE.finditer(text):
        positions += range(pos, match.start())
        positions.append(match.start())
        pos = match.end()
    positions += range(pos, len(text))
    return positions


def _insert_pauses(
    audio: np.ndarray, pauses: list[tuple[int, int]], words: list[tuple[int, int]]
) -> tuple[np.ndarray, dict[int, int]]:
    """Silence for each pause at the start of the first word after it (mostly inside eSpeak's own
    pause before that word), or at the end when no word follows; the speech on either side of a
    cut fades out and in over a few milliseconds, so that no cut clicks. With the audio, the
    silences inserted: where (sample) and how long (samples)."""
    silences: dict[int, int] = {}  # cut (sample) -> milliseconds of silence
    for at, ms in pauses:
        start_ms = next((w_ms for w_at, w_ms in words if w_at >= at), None)
        cut = audio.size if start_ms is None else round(start_ms * SAMPLE_RATE / 1000)
        cut = min(max(cut, max(silences, default=0)), audio.size)
        silences[cut] = silences.get(cut, 0) + ms
    audio = audio.copy()
    parts: list[np.ndarray] = []
    done = 0
    for cut, ms in silences.items():
        before = audio[max(0, cut - _FADE) : cut]
        before *= np.linspace(1.0, 0.0, before.size, dtype=np.float32)
        after = audio[cut : cut + _FADE]
        after *= np.linspace(0.0, 1.0, after.size, dtype=np.float32)
        parts += [audio[done:cut], np.zeros(round(ms * SAMPLE_RATE / 1000), np.float32)]
        done = cut
    parts.append(audio[done:])
    inserted = {cut: round(ms * SAMPLE_RATE / 1000) for cut, ms in silences.items()}
    return np.concatenate(parts), inserted


def _resample(audio: np.ndarray, src_rate: int, dst_rate: int) -> np.ndarray:
    """Linear-interpolation resampling: plenty for eSpeak's band-limited speech."""
    if src_rate == dst_rate or audio.size == 0:
        return audio
    n_out = round(audio.size * dst_rate / src_rate)
    positions = np.linspace(0, audio.size - 1, n_out)
    resampled: np.ndarray = np.interp(positions, np.arange(audio.size), audio)
    return resampled.astype(np.float32)
