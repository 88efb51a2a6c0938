"""Hooks into ChatTTS's internals for batched synthesis: per-row seeded sampling, per-row token
counts and per-row trimming of the decoded batch (see `chat.py` and `engine.py` for their use)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

# ChatTTS's default budget: 2048 audio tokens = 43.7 s at 46.875 tokens per second.
MAX_NEW_TOKEN = 2048
FRAMES_PER_TOKEN = 2  # the decoder turns each GPT hidden state into two mel frames


@dataclass
class Batch:
    """What one `infer` call shares with the hooks inside ChatTTS."""

    generators: list[torch.Generator]
    token_lengths: list[int] | None = None
    max_new_token: int = MAX_NEW_TOKEN
    rows: list[np.ndarray] | None = None


@dataclass
class Row:
    audio: np.ndarray
    tokens: int
    truncated: bool


class RowSampler:
    """The last logits processor of a batch: draws each row's token with that row's generator.

    It returns logits that are -inf except at the chosen token, so ChatTTS's own draw (made with
    its private generator, as we pass `manual_seed`) can only confirm the choice. Row b of the
    batch owns rows b*k .. b*k+k-1 of the logits (k = num_vq for audio codes, 1 for text).
    """

    def __init__(self, generators: list[torch.Generator], eos: int) -> None:
        self.generators = generators
        self.eos = eos
        self.step = 0

    def __call__(self, _input_ids: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        probs = torch.softmax(logits.float(), dim=-1)
        if self.step == 0:  # ChatTTS treats an end at the first step as a failed row
            probs[:, self.eos] = 0.0
        self.step += 1
        per_row = probs.size(0) // len(self.generators)
        chosen = torch.empty((probs.size(0), 1), dtype=torch.long, device=probs.device)
        for b, generator in enumerate(self.generators):
            rows = slice(b * per_row, (b + 1) * per_row)
            chosen[rows] = torch.multinomial(probs[rows], 1, generator=generator)
        out = torch.full_like(logits, float("-inf"))
        return out.scatter_(1, chosen, 0.0)


class SeededGenerate:
    """Wraps `GPT.generate`: adds the batch's row sampler and records each row's token count."""

    def __init__(self, inner: Any, chat: Any) -> None:
        self.inner = inner
        self.chat = chat

    def __call__(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        batch = self.chat.batch
        if batch is None:
            yield from self.inner(*args, **kwargs)
            return
        sampler = RowSampler(batch.generators, int(kwargs["eos_token"]))
        kwargs["logits_processors"] = (*kwargs.get("logits_processors", ()), sampler)
        kwargs["manual_seed"] = 0  # ChatTTS's private generator, never the process-global RNG
        for out in self.inner(*args, **kwargs):
            if not kwargs.get("infer_text", False):
                batch.token_lengths = [int(ids.size(0)) for ids in out.ids]
                batch.max_new_token = int(kwargs.get("max_new_token", MAX_NEW_TOKEN))
            yield out


def trim_rows(wavs: np.ndarray, lengths: list[int], samples_per_token: int) -> list[np.ndarray]:
    """Cut each row of a padded batch to its own token count: no tail decoded from padding."""
    longest = max(lengths)
    total = wavs.shape[-1]
    return [
        np.ascontiguousarray(
            wavs[i, : max(0, total - (longest - n) * samples_per_token)], dtype=np.float32
        )
        for i, n in enumerate(lengths)
    ]
