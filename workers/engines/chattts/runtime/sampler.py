"""Sampling of audio codes for every row at once, each with its own parameters and randomness.

The processing is ChatTTS's, in its order: temperature, repetition penalty over the last 16 codes
of the same codebook, top-P then top-K (each keeping at least 3 tokens, as ChatTTS's warpers do),
no end at the first step. The draw is an inverse-CDF draw from a counter-based uniform: a hash
of (row seed, token index, codebook). A row's codes therefore depend on its seed and its own
progress, never on its batch-mates, its slot or the step at which it joined.
"""

from __future__ import annotations

import torch

# ChatTTS's repetition-penalty window and its warpers' floor of kept tokens.
PENALTY_WINDOW = 16
MIN_TOKENS_TO_KEEP = 3
_MASK64 = (1 << 64) - 1


def _signed(value: int) -> int:
    """A 64-bit constant as torch's int64 holds it."""
    return value - (1 << 64) if value >= 1 << 63 else value


_GOLDEN = _signed(0x9E3779B97F4A7C15)
_MIX1 = _signed(0xBF58476D1CE4E5B9)
_MIX2 = _signed(0x94D049BB133111EB)


def _shift_right(x: torch.Tensor, bits: int) -> torch.Tensor:
    """Logical right shift of int64 values (torch's `>>` is arithmetic)."""
    return (x >> bits) & ((1 << (64 - bits)) - 1)


def counter_uniform(seed: torch.Tensor, counter: torch.Tensor) -> torch.Tensor:
    """Uniforms in [0, 1) from splitmix64 of (seed, counter): int64 tensors of one shape.

    Written out rather than taken from torch's Philox: torch offers no per-element counter-based
    draw, and one generator per row would mean a Python loop per step.
    """
    x = seed * _GOLDEN + counter  # int64 arithmetic wraps: it is modular, as the hash needs
    x = x + _GOLDEN
    x = (x ^ _shift_right(x, 30)) * _MIX1
    x = (x ^ _shift_right(x, 27)) * _MIX2
    x = x ^ _shift_right(x, 31)
    return _shift_right(x, 40).double() / float(1 << 24)


def process_logits(
    logits: torch.Tensor,
    history: torch.Tensor,
    history_len: torch.Tensor,
    temperature: torch.Tensor,
    penalty: torch.Tensor,
    top_p: torch.Tensor,
    top_k: torch.Tensor,
    first: torch.Tensor,
    eos: int,
    top_k_max: int | None = None,
) -> torch.Tensor:
    """Masked, scaled logits [B, Q, A] ready for softmax.

    history [B, Q, W]: the row's last W codes per codebook (the newest last), of which the last
    `history_len` [B] are real; temperature, penalty, top_p [B] floats; top_k [B] ints; first [B]:
    the row has generated nothing yet. `top_k_max`, the largest top_k, when the caller knows it
    (reading it from the device would stall the step).
    """
    rows, books, tokens = logits.shape
    x = logits.float() / temperature.view(rows, 1, 1)
    # Repetition penalty: each code seen n times in the window scales its logit by penalty^n.
    window = history.size(-1)
    valid = torch.arange(window, device=x.device) >= (window - history_len).view(rows, 1, 1)
    counts = torch.zeros_like(x)
    counts.scatter_add_(2, history, valid.expand_as(history).to(x.dtype))
    alpha = torch.pow(penalty.view(rows, 1, 1), counts)
    x = torch.where(x < 0, x * alpha, x / alpha)
    # Top-P as transformers' TopPLogitsWarper: drop the low tail whose mass is <= 1 - top_p.
    ascending, order = torch.sort(x, dim=-1)
    cumulative = ascending.softmax(-1).cumsum(-1)
    drop = cumulative <= (1 - top_p).view(rows, 1, 1)
    drop[..., -MIN_TOKENS_TO_KEEP:] = False
    x = x.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
    # Top-K as TopKLogitsWarper: keep the logits >= the k-th largest.
    k = top_k.clamp(min=MIN_TOKENS_TO_KEEP, max=tokens).view(rows, 1, 1)
    largest = int(k.max()) if top_k_max is None else max(MIN_TOKENS_TO_KEEP, min(top_k_max, tokens))
    kth = torch.topk(x, largest, dim=-1).values.gather(-1, (k - 1).expand(rows, books, 1))
    x = x.masked_fill(x < kth, float("-inf"))
    # ChatTTS discards a row whose first code ends it: the end token is not drawn first.
    x[..., eos] = x[..., eos].masked_fill(first.view(rows, 1), float("-inf"))
    return x


def draw(logits: torch.Tensor, seed: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """One code per row and codebook [B, Q] from processed logits [B, Q, A]; the uniform of row b,
    codebook q is counter_uniform(seed[b], index[b] * Q + q), index = the row's token index."""
    rows, books, _ = logits.shape
    probs = logits.softmax(-1)
    cdf = probs.cumsum(-1)
    counter = index.view(rows, 1) * books + torch.arange(books, device=logits.device)
    u = counter_uniform(seed.view(rows, 1).expand(rows, books), counter)
    target = (u * cdf[..., -1].double()).to(cdf.dtype).unsqueeze(-1)
    chosen = torch.searchsorted(cdf, target, right=True).squeeze(-1)
    # A draw past the last kept token (rounding at the top of the CDF) takes that token.
    last_kept = (probs > 0).cumsum(-1).argmax(-1)
    return torch.minimum(chosen, last_kept)
