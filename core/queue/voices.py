"""The catalogue of built-in voice names every engine provides, and registered-voice storage."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Voice:
    name: str
    language: str  # BCP 47
    gender: str
    description: str
    builtin: bool = True

    def public(self) -> dict[str, Any]:
        return asdict(self)


# Built-in voices. Every engine maps each name to its own voice (eSpeak variant, ChatTTS speaker
# embedding), so a client's choice works whichever engine serves it.
BUILTIN_VOICES: tuple[Voice, ...] = (
    Voice("zh_female", "zh-CN", "female", "Mandarin, female"),
    Voice("zh_male", "zh-CN", "male", "Mandarin, male"),
    Voice("en_female", "en-US", "female", "English, female"),
    Voice("en_male", "en-US", "male", "English, male"),
    Voice("zh_female_2", "zh-CN", "female", "Mandarin, female, brighter"),
    Voice("zh_male_2", "zh-CN", "male", "Mandarin, male, deeper"),
    Voice("en_female_2", "en-GB", "female", "English (British), female"),
    Voice("en_male_2", "en-GB", "male", "English (British), male"),
)
BUILTIN_BY_NAME = {v.name: v for v in BUILTIN_VOICES}
DEFAULT_VOICE = "zh_female"
