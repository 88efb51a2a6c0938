"""The ChatTTS engine (`pip install '.[chattts]'`): its light API here, the engine on first use.

Importing this module does not import torch: `find_weights`, voice validation and text
normalization serve `create_engine("auto")` and the web tier; `ChatTTSEngine` loads on access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from core.text.normalize import is_speakable, normalize
from core.voices.chattts import (
    parse_voice_data,
    recording_voice_data,
    sample_voice_data,
    validate_voice_data,
)
from workers.engines.chattts.loading.loader import find_weights

if TYPE_CHECKING:
    from workers.engines.chattts.engine import ChatTTSEngine

__all__ = [
    "ChatTTSEngine",
    "find_weights",
    "is_speakable",
    "normalize",
    "parse_voice_data",
    "recording_voice_data",
    "sample_voice_data",
    "validate_voice_data",
]


def __getattr__(name: str) -> Any:
    if name == "ChatTTSEngine":
        from workers.engines.chattts.engine import ChatTTSEngine

        return ChatTTSEngine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
