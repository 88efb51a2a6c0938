"""Audio decoded chunk by chunk against the one-shot decode of the same hidden states."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from tests.workers.engines.chattts.conftest import requires_chattts
from workers.engines.chattts.runtime.vocoder import Cursor, Vocoder, conv_reach

pytestmark = [pytest.mark.chattts, requires_chattts]


def snr_db(reference: np.ndarray, other: np.ndarray) -> float:
    noise = float(np.sum((reference - other) ** 2))
    return float("inf") if noise == 0 else 10 * np.log10(float(np.sum(reference**2)) / noise)


def chunked(
    vocoder: Vocoder, hiddens: torch.Tensor, size: int, first: int, lookahead: int
) -> list[np.ndarray]:
    """Chunks as the scheduler makes them: hidden states arrive one token at a time."""
    cursor, out = Cursor(), []
    for available in range(1, hiddens.size(0) + 1):
        while True:
            want = first if cursor.emitted == 0 else size
            piece = vocoder.chunk(hiddens[:available], cursor, want, lookahead, False)
            if piece is None:
                break
            out.append(piece)
    out.append(vocoder.chunk(hiddens, cursor, size, lookahead, True))
    return out


def hidden_states(engine: Any, tokens: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(tokens)
    return torch.randn(tokens, engine.chat.config.gpt.hidden_size, generator=generator)


def test_the_reach_is_read_from_the_modules(engine: Any) -> None:
    vocoder = engine.runtime.vocoder
    # Tiny decoder: conv_in (3, 3) + one ConvNeXt block (kernel 7, dilation 2) + out_conv (3);
    # tiny Vocos: embed (7) + one block (7); the ISTFT overlaps 2 frames each side.
    assert conv_reach(engine.chat.decoder) == 1 + 1 + 6 + 1
    assert conv_reach(engine.chat.vocos.backbone) == 3 + 3
    assert vocoder.exact_tokens == -(-(9 + 6 + 2) // 2) + 1


@pytest.mark.parametrize(("size", "first"), [(24, 24), (24, 8), (5, 3)])
def test_chunks_with_the_full_lookahead_join_into_the_one_shot_decode(
    engine: Any, size: int, first: int
) -> None:
    vocoder = engine.runtime.vocoder
    hiddens = hidden_states(engine, 100)
    whole = vocoder.decode(hiddens)
    pieces = chunked(vocoder, hiddens, size, first, vocoder.exact_tokens)
    joined = np.concatenate(pieces)
    assert joined.size == whole.size == (2 * 100 - 1) * vocoder.hop
    assert pieces[0].size == first * vocoder.samples_per_token
    np.testing.assert_allclose(joined, whole, atol=1e-5 * float(np.abs(whole).max()))
    assert snr_db(whole, joined) > 80


def test_less_lookahead_costs_accuracy_never_length(engine: Any) -> None:
    vocoder = engine.runtime.vocoder
    hiddens = hidden_states(engine, 100)
    whole = vocoder.decode(hiddens)
    snrs = []
    for lookahead in (0, 2, vocoder.exact_tokens):
        joined = np.concatenate(chunked(vocoder, hiddens, 24, 24, lookahead))
        assert joined.size == whole.size
        snrs.append(snr_db(whole, joined))
    assert snrs[0] < snrs[1] < snrs[2] and snrs[0] < 40


def test_a_row_of_no_tokens_has_no_audio(engine: Any) -> None:
    vocoder = engine.runtime.vocoder
    empty = torch.zeros(0, engine.chat.config.gpt.hidden_size)
    assert vocoder.chunk(empty, Cursor(), 24, 0, True).size == 0
