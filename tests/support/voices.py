"""Voices to register: a built-in speaker embedding, recordings and their upload forms."""

from __future__ import annotations

import io

import aiohttp
import numpy as np
import soundfile as sf

from core.voices.chattts import builtin_embeddings

EMBEDDING = builtin_embeddings()["en_male_2"]


def wav_bytes(seconds: float, rate: int = 16_000, fmt: str = "WAV") -> bytes:
    t = np.arange(int(rate * seconds)) / rate
    buffer = io.BytesIO()
    sf.write(buffer, (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32), rate, format=fmt)
    return buffer.getvalue()


def recording_form(name: str, audio: bytes | None, transcript: str | None) -> aiohttp.FormData:
    form = aiohttp.FormData()
    form.add_field("name", name)
    if transcript is not None:
        form.add_field("transcript", transcript)
    if audio is not None:
        form.add_field("audio", audio, filename="me.wav", content_type="audio/wav")
    return form
