"""The speakers one loaded ChatTTS engine resolves a segment's voice to: built-in embeddings and
registered voices (parsed, recordings encoded by the DVAE, kept in a small LRU cache)."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any

import numpy as np
import torch

from core.queue.voice_names import blend_of, seed_of
from core.voices.chattts import VoiceData, parse_voice_data, recording_voice_data, sample_voice_data
from workers.engines.base import EngineError, Segment
from workers.engines.chattts.library.params import blend_speakers, draw_seed_speaker

VOICE_CACHE_SIZE = 64  # parsed registered voices kept per worker (a recording costs an encode)


class Speakers:
    """Voice data for segments, for one loaded model (assembly.Model; None before the engine is
    loaded)."""

    def __init__(self, model: Any = None, builtin: dict[str, str] | None = None) -> None:
        self.model = model
        self._builtin = builtin or {}
        self._cache: OrderedDict[str, VoiceData] = OrderedDict()
        self._drawn: OrderedDict[str, str] = OrderedDict()  # seeds and blends, by name

    def voice(self, segment: Segment) -> VoiceData:
        if segment.voice_data:
            return self._registered_voice(segment.voice_data)
        return VoiceData("embedding", spk_emb=self._derived(segment.request.voice))

    def _derived(self, name: str) -> str:
        """A built-in voice's embedding, a seed's drawn, a blend's mixed (kept: a seed's draw
        and a blend's mix are the same every time)."""
        embedding = self._builtin.get(name) or self._drawn.get(name)
        if embedding is not None:
            return embedding
        seed = seed_of(name)
        blend = blend_of(name) if seed is None else None
        if seed is not None:
            embedding = draw_seed_speaker(self._speaker_stat(), seed)
        elif blend is not None:
            embedding = blend_speakers([(self._derived(p), w) for p, w in blend.parts])
        else:
            raise EngineError(f"unknown voice {name!r}", retryable=False)
        self._drawn[name] = embedding
        while len(self._drawn) > VOICE_CACHE_SIZE:
            self._drawn.popitem(last=False)
        return embedding

    def _speaker_stat(self) -> str:
        if self.model is None:
            raise EngineError("the chattts engine was not loaded", retryable=True)
        stat: str = self.model.config.spk_stat
        return stat

    def _registered_voice(self, data: str) -> VoiceData:
        key = hashlib.sha256(data.encode()).hexdigest()
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        try:
            voice = parse_voice_data(data, self._speaker_dim())
        except ValueError as exc:
            raise EngineError(f"invalid voice data: {exc}", retryable=False) from exc
        if voice.kind == "recording":
            voice = self._encode_recording(voice)
        self._cache[key] = voice
        while len(self._cache) > VOICE_CACHE_SIZE:
            self._cache.popitem(last=False)
        return voice

    def _encode_recording(self, voice: VoiceData) -> VoiceData:
        """ChatTTS's sample-audio path: the DVAE encodes the recording into prompt codes."""
        if self.model is None or voice.recording is None:
            raise EngineError("the chattts engine was not loaded", retryable=True)
        with torch.inference_mode():  # as ChatTTS's `Chat.sample_audio_speaker`
            codes = self.model.recording_encoder().sample_audio(voice.recording)
            spk_smp: str = self.model.speaker.encode_prompt(codes)
        return VoiceData("sample", spk_smp=spk_smp, txt_smp=voice.txt_smp)

    def from_recording(self, audio: np.ndarray, sample_rate: int, transcript: str) -> str:
        """Voice data (a ChatTTS sample prompt with its transcript) from a reference recording."""
        try:
            packed = parse_voice_data(recording_voice_data(audio, sample_rate, transcript))
        except ValueError as exc:
            raise EngineError(f"invalid reference recording: {exc}", retryable=False) from exc
        voice = self._encode_recording(packed)
        return sample_voice_data(voice.spk_smp or "", voice.txt_smp or "")

    def _speaker_dim(self) -> int:
        return int(self.model.config.gpt.hidden_size) if self.model is not None else 768
