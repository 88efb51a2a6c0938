"""ChatTTS's Chat as the paths that need all of ChatTTS use it: refinement, the library runtime and
reference recordings (importing this module imports the whole library; `assembly.chat_around`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ChatTTS
import numpy as np
import torch

from workers.engines.chattts.library.sampling import FRAMES_PER_TOKEN, Batch, trim_rows


class BatchChat(ChatTTS.Chat):  # type: ignore[misc]
    """ChatTTS's Chat, keeping each row of the decoded batch to its own length."""

    batch: Batch | None = None
    samples_per_token = FRAMES_PER_TOKEN * 256
    dvae_factory: Callable[[], Any] | None = None  # builds `dvae` on first use (assembly.py)

    def __getattr__(self, name: str) -> Any:
        """`dvae`, the encoder of reference recordings, is built the first time it is asked for
        (called only for attributes that normal lookup did not find)."""
        factory = self.__dict__.get("dvae_factory")
        if name == "dvae" and factory is not None:
            self.dvae = factory()
            return self.dvae
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _decode_to_wavs(self, result_list: list[torch.Tensor], use_decoder: bool) -> Any:
        lengths = [int(r.size(0)) for r in result_list]
        wavs = super()._decode_to_wavs(result_list, use_decoder)
        if self.batch is not None and lengths:
            self.batch.rows = trim_rows(np.asarray(wavs), lengths, self.samples_per_token)
        return wavs
