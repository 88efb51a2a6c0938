"""eSpeak NG through `espeakng-loader` (ctypes): real speech on any CPU in milliseconds, no weights.

The C library keeps global state and is not thread-safe: one instance per process, used only from
the worker's engine thread.
"""

from __future__ import annotations

import ctypes
from collections.abc import Hashable
from typing import Any

import numpy as np

from workers.infra.settings import Settings
from workers.queue.job import SynthesisRequest
from workers.queue.voices import BUILTIN_VOICES, Voice
from workers.text.sentences import split_sentences

from .base import SAMPLE_RATE, ChunkSink, EngineError, Segment

_AUDIO_OUTPUT_SYNCHRONOUS = 2
_CHARS_UTF8 = 1
_PARAM_RATE, _PARAM_PITCH = 1, 3
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
# Segments long enough to stream progress on long texts, short enough to start playing soon.
_SEGMENT_CHARS = 200

_CALLBACK = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p
)


class EspeakEngine:
    name = "espeak"
    sample_rate = SAMPLE_RATE
    max_batch = 1  # eSpeak synthesizes one text at a time; batching would only add latency
    deterministic = True  # same text and voice, same samples: results may be cached

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.model_version = "espeak-ng"
        self._lib: Any = None
        self._native_rate = 0
        self._chunks: list[np.ndarray] = []
        self._callback = _CALLBACK(self._collect)  # kept referenced: C holds the pointer

    def _collect(self, wav: Any, count: int, _events: Any) -> int:
        if count > 0:
            self._chunks.append(np.ctypeslib.as_array(wav, shape=(count,)).copy())
        return 0

    def load(self) -> None:
        import espeakng_loader

        try:
            lib = ctypes.CDLL(espeakng_loader.get_library_path())
        except OSError as exc:
            raise EngineError(f"cannot load the eSpeak NG library: {exc}") from exc
        data_path = espeakng_loader.get_data_path().encode()
        rate = lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, 0, data_path, 0)
        if rate <= 0:
            raise EngineError(f"eSpeak NG failed to initialise with data at {data_path!r}")
        lib.espeak_SetSynthCallback(self._callback)
        version = ctypes.c_char_p()
        lib.espeak_Info.restype = ctypes.c_char_p
        info = lib.espeak_Info(ctypes.byref(version))
        self.model_version = f"espeak-ng-{info.decode() if info else 'unknown'}"
        self._lib, self._native_rate = lib, rate

    def warmup(self) -> None:
        for request in (
            SynthesisRequest(text="你好", voice="zh_female"),
            SynthesisRequest(text="Hello", voice="en_female"),
        ):
            self.synthesize([Segment("warmup", 0, request.text, request)])

    def voices(self) -> list[Voice]:
        return [v for v in BUILTIN_VOICES if v.name in _VOICE_TABLE]

    def split(self, text: str, request: SynthesisRequest, language: str | None = None) -> list[str]:
        return split_sentences(text, _SEGMENT_CHARS)

    def batch_key(self, request: SynthesisRequest) -> Hashable:
        return (request.voice, request.speed)

    def synthesize(
        self, segments: list[Segment], on_chunk: ChunkSink | None = None
    ) -> list[np.ndarray]:
        if self._lib is None:
            raise EngineError("the espeak engine was not loaded")
        out = []
        for segment in segments:  # a segment takes milliseconds: it goes out whole
            samples = self._one(segment)
            if on_chunk is not None:
                on_chunk(segment, samples, True)
            out.append(samples)
        return out

    def _one(self, segment: Segment) -> np.ndarray:
        voice, pitch = _VOICE_TABLE.get(segment.request.voice, _VOICE_TABLE["zh_female"])
        lib = self._lib
        if lib.espeak_SetVoiceByName(voice) != 0:
            raise EngineError(f"eSpeak NG has no voice {voice.decode()!r}")
        lib.espeak_SetParameter(_PARAM_RATE, int(_DEFAULT_WPM * segment.request.speed), 0)
        lib.espeak_SetParameter(_PARAM_PITCH, pitch, 0)
        self._chunks = []
        data = segment.text.encode()
        status = lib.espeak_Synth(
            ctypes.c_char_p(data), len(data) + 1, 0, 0, 0, _CHARS_UTF8, None, None
        )
        if status != 0:
            raise EngineError(f"eSpeak NG synthesis failed with status {status}")
        pcm = np.concatenate(self._chunks) if self._chunks else np.zeros(0, np.int16)
        return _resample(pcm.astype(np.float32) / 32768.0, self._native_rate, SAMPLE_RATE)


def _resample(audio: np.ndarray, src_rate: int, dst_rate: int) -> np.ndarray:
    """Linear-interpolation resampling: plenty for eSpeak's band-limited speech."""
    if src_rate == dst_rate or audio.size == 0:
        return audio
    n_out = round(audio.size * dst_rate / src_rate)
    positions = np.linspace(0, audio.size - 1, n_out)
    resampled: np.ndarray = np.interp(positions, np.arange(audio.size), audio)
    return resampled.astype(np.float32)
