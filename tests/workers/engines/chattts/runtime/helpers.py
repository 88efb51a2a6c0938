"""Rows for the runtime tests: prompts of real texts and voices, built as the engine builds them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from core.voices.chattts import VoiceData, builtin_embeddings
from workers.engines.base import PlaybackClock
from workers.engines.chattts.prompt import prompt_embeddings
from workers.engines.chattts.runtime.decoder import StaticDecoder
from workers.engines.chattts.runtime.scheduler import RowRequest, RowResult, Sampling, SlotScheduler
from workers.engines.chattts.runtime.vocoder import Vocoder
from workers.engines.chattts.runtime.weights import Transformer

TEXTS = ["你好，欢迎使用语音合成。", "今天天气很好", "我们欢迎你。", "Hello world.", "你好世界。"]
VOICES = ["zh_female", "en_male", "zh_male", "en_female", "zh_female_2", "zh_male_2", "en_female_2"]


def prompt(chat: Any, text: str, voice: str = "zh_female", speed: int = 5) -> torch.Tensor:
    data = VoiceData("embedding", spk_emb=builtin_embeddings()[voice])
    return prompt_embeddings(
        chat, chat.normalizer(text, True, True, None), data, f"[speed_{speed}]"
    )


def mixed_prompts(chat: Any, count: int) -> list[torch.Tensor]:
    """`count` prompts of different texts, voices and speeds."""
    return [
        prompt(chat, TEXTS[i % len(TEXTS)], VOICES[i % len(VOICES)], 3 + i % 5)
        for i in range(count)
    ]


def scheduler(chat: Any, slots: int = 8, **options: Any) -> SlotScheduler:
    transformer = Transformer.from_llama(chat.gpt.gpt)
    decoder = StaticDecoder(transformer, chat.embed, slots=slots, context=512)
    return SlotScheduler(decoder, Vocoder(chat.decoder, chat.vocos), 128, **options)


class Rows:
    """Results by key, a way to run code when a row sends its n-th chunk, and the order of
    first chunks and ends (`log`: ("first", key) and ("done", key))."""

    def __init__(self) -> None:
        self.results: dict[Any, RowResult] = {}
        self.chunks: dict[Any, list[np.ndarray]] = {}
        self.triggers: dict[tuple[Any, int], Callable[[], None]] = {}
        self.log: list[tuple[str, Any]] = []

    def request(
        self,
        key: Any,
        embeds: torch.Tensor,
        sampling: Sampling,
        streamed: bool = True,
        clock: PlaybackClock | None = None,
    ) -> RowRequest:
        """`clock`: a listener plays the row (its audio counts as sent as it comes)."""

        def on_chunk(_: Any, audio: np.ndarray, final: bool) -> None:
            if clock is not None:
                clock.sent(audio.size / 24_000)
            if key not in self.chunks:
                self.log.append(("first", key))
            self.chunks.setdefault(key, []).append(audio)
            trigger = self.triggers.pop((key, len(self.chunks[key])), None)
            if trigger is not None:
                trigger()

        def on_done(_: Any, result: RowResult) -> None:
            self.log.append(("done", key))
            self.results[key] = result

        return RowRequest(key, embeds, sampling, on_done, on_chunk if streamed else None, clock)
