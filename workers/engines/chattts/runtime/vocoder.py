"""GPT hidden states to audio: ChatTTS's decoder and Vocos, one-shot or chunk by chunk.

Neither network is causal: each audio sample depends on the hidden states of about ±50 tokens
around it (measured from the modules: every Conv1d's reach, plus the ISTFT's overlap). A chunk is
decoded from a window holding that much left context, which exists already, and as much right
context as is available, at least the `lookahead` asked for. With a full lookahead the chunks
join into exactly the one-shot decode (up to float rounding); with less, the tail of each chunk
is an approximation, traded for latency.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

FRAMES_PER_TOKEN = 2  # the decoder turns each hidden state into two mel frames
SAMPLE_RATE = 24_000  # Vocos's output


def conv_reach(module: nn.Module) -> int:
    """Frames each side that a chain of the module's Conv1d layers sees (their reaches add up)."""
    return sum(
        m.dilation[0] * (m.kernel_size[0] - 1) // 2
        for m in module.modules()
        if isinstance(m, nn.Conv1d)
    )


@dataclass
class Cursor:
    """How far a row's audio has gone out: tokens already turned into emitted samples."""

    emitted: int = 0


class Vocoder:
    def __init__(self, decoder: Any, vocos: Any) -> None:
        self.decoder, self.vocos = decoder, vocos
        istft = vocos.head.istft
        self.hop = int(istft.hop_length)
        self.samples_per_token = FRAMES_PER_TOKEN * self.hop
        overlap = math.ceil(int(istft.n_fft) / (2 * self.hop))
        frames = conv_reach(decoder) + conv_reach(vocos.backbone) + overlap
        # Tokens of context each side for a chunk to equal the one-shot decode.
        self.exact_tokens = math.ceil(frames / FRAMES_PER_TOKEN) + 1
        self.device = next(decoder.parameters()).device
        self.tokens_per_s = SAMPLE_RATE / self.samples_per_token  # of speech: 46.875

    @torch.inference_mode()
    def decode(self, hiddens: torch.Tensor) -> np.ndarray:
        """Audio of hidden states [T, D], as ChatTTS decodes one row alone."""
        if hiddens.size(0) == 0:
            return np.zeros(0, np.float32)
        x = hiddens.to(self.device, torch.float32).T.unsqueeze(0)
        mel = self.decoder(x)
        audio = self.vocos.decode(mel)
        out: np.ndarray = audio[0].float().cpu().numpy()
        return out

    def chunk(
        self,
        hiddens: torch.Tensor,
        cursor: Cursor,
        size: int,
        lookahead: int,
        finished: bool,
    ) -> np.ndarray | None:
        """The next chunk of a row whose available hidden states are `hiddens` [T, D]: `size`
        more tokens once `lookahead` more exist, else None; once `finished`, all the rest (maybe
        nothing: an empty array)."""
        total = hiddens.size(0)
        start = cursor.emitted
        if finished:
            end = total
            if end <= start:
                return np.zeros(0, np.float32)
        else:
            end = start + size
            if total < end + lookahead:
                return None
        w0 = max(0, start - self.exact_tokens)
        w1 = total if finished else min(total, end + self.exact_tokens)
        window = hiddens[w0:w1]
        if not finished and w1 == end:  # no right context at all: the last state stands in,
            window = torch.cat((window, window[-1:]))  # else the chunk would end a hop short
        audio = self.decode(window)
        first = (start - w0) * self.samples_per_token
        last = audio.size if finished else (end - w0) * self.samples_per_token
        cursor.emitted = end
        return np.ascontiguousarray(audio[first:last])
