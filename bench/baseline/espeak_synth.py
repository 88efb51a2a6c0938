"""Text to WAV bytes through eSpeak NG (`espeakng-loader`, ctypes), at eSpeak's own rate.

The library keeps global state: the worker calls it from one thread at a time.
"""

from __future__ import annotations

import ctypes
import io
from typing import Any

import espeakng_loader
import numpy as np
import soundfile as sf

_AUDIO_OUTPUT_SYNCHRONOUS = 2
_CHARS_UTF8 = 1
VOICES = {"zh_female": b"cmn+f3", "zh_male": b"cmn+m3"}

_CALLBACK = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p
)
_chunks: list[np.ndarray] = []
_lib: Any = None
_rate = 0


def _collect(wav: Any, count: int, _events: Any) -> int:
    if count > 0:
        _chunks.append(np.ctypeslib.as_array(wav, shape=(count,)).copy())
    return 0


_callback = _CALLBACK(_collect)  # kept referenced: the library holds the pointer


def _library() -> Any:
    global _lib, _rate
    if _lib is None:
        lib = ctypes.CDLL(espeakng_loader.get_library_path())
        data = espeakng_loader.get_data_path().encode()
        _rate = lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, 0, data, 0)
        if _rate <= 0:
            raise RuntimeError("eSpeak NG failed to initialise")
        lib.espeak_SetSynthCallback(_callback)
        _lib = lib
    return _lib


def synthesize(text: str, voice: str) -> bytes:
    lib = _library()
    lib.espeak_SetVoiceByName(VOICES.get(voice, VOICES["zh_female"]))
    _chunks.clear()
    data = text.encode()
    if lib.espeak_Synth(ctypes.c_char_p(data), len(data) + 1, 0, 0, 0, _CHARS_UTF8, None, None):
        raise RuntimeError("eSpeak NG synthesis failed")
    pcm = np.concatenate(_chunks) if _chunks else np.zeros(0, np.int16)
    out = io.BytesIO()
    sf.write(out, pcm, _rate, format="WAV", subtype="PCM_16")
    return out.getvalue()
