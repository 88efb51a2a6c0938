"""Rows for the runtime tests: prompts of real texts and voices, built as the engine builds them."""

from __future__ import annotations

from typing import Any

import torch

from core.voices.chattts import VoiceData, builtin_embeddings
from workers.engines.chattts.prompt import prompt_embeddings

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
