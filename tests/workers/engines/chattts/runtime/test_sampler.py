"""Per-row sampling: ChatTTS's logits processing, vectorised, and counter-based draws."""

from __future__ import annotations

import pytest
import torch

from tests.workers.engines.chattts.conftest import requires_chattts
from workers.engines.chattts.runtime.sampler import (
    PENALTY_WINDOW,
    counter_uniform,
    draw,
    process_logits,
)

pytestmark = [pytest.mark.chattts, requires_chattts]
ROWS, BOOKS, TOKENS = 5, 4, 626
EOS = TOKENS - 1


def test_counter_uniforms_are_deterministic_distinct_and_uniform() -> None:
    seeds = torch.arange(1000).repeat_interleave(100)
    counters = torch.arange(100).repeat(1000)
    u = counter_uniform(seeds, counters)
    assert torch.equal(u, counter_uniform(seeds, counters))
    assert float(u.min()) >= 0.0 and float(u.max()) < 1.0
    assert u.unique().numel() > 0.99 * u.numel()
    # Uniform: every tenth of [0, 1) holds 10 % of 100 000 draws, within 5 standard deviations.
    counts = torch.histc(u.float(), bins=10, min=0.0, max=1.0)
    assert float((counts - 10_000).abs().max()) < 5 * (100_000 * 0.1 * 0.9) ** 0.5


def chattts_processing(
    logits: torch.Tensor,
    history: list[torch.Tensor],
    temperature: float,
    penalty: float,
    top_p: float,
    top_k: int,
) -> torch.Tensor:
    """ChatTTS's own processors (gen_logits) on one row's [BOOKS, TOKENS] logits."""
    from ChatTTS.model.processors import gen_logits

    warpers, processors = gen_logits(TOKENS - 1, top_p, top_k, penalty)
    x = logits / temperature
    tokens = torch.stack(history, 1) if history else torch.zeros((BOOKS, 0), dtype=torch.long)
    for step in (*processors, *warpers):
        x = step(tokens, x)
    return x


def test_processing_matches_chatttss_processors_row_by_row() -> None:
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(ROWS, BOOKS, TOKENS, generator=generator) * 3
    temperature = torch.tensor([0.3, 0.7, 1.0, 0.5, 1.3])
    penalty = torch.tensor([1.05, 1.05, 1.2, 1.0, 1.05])
    top_p = torch.tensor([0.7, 0.9, 0.5, 1.0, 0.1])
    top_k = torch.tensor([20, 5, 1, 100, 20])
    lengths = [0, 3, PENALTY_WINDOW, 7, 1]
    history = torch.zeros(ROWS, BOOKS, PENALTY_WINDOW, dtype=torch.long)
    per_row: list[list[torch.Tensor]] = []
    for b, n in enumerate(lengths):
        # Codes likely to repeat: drawn from a few of the highest logits.
        seen = [logits[b].topk(6, -1).indices[:, i % 6] for i in range(n)]
        per_row.append(seen)
        if n:
            history[b, :, PENALTY_WINDOW - n :] = torch.stack(seen, 1)
    ours = process_logits(
        logits,
        history,
        torch.tensor(lengths),
        temperature,
        penalty,
        top_p,
        top_k,
        torch.zeros(ROWS, dtype=torch.bool),
        EOS,
    )
    for b in range(ROWS):
        expected = chattts_processing(
            logits[b],
            per_row[b],
            float(temperature[b]),
            float(penalty[b]),
            float(top_p[b]),
            int(top_k[b]),
        )
        assert torch.equal(torch.isinf(ours[b]), torch.isinf(expected)), b
        finite = torch.isfinite(expected)
        torch.testing.assert_close(ours[b][finite], expected[finite], atol=1e-5, rtol=1e-5)


def test_the_end_token_is_never_drawn_first() -> None:
    logits = torch.full((2, BOOKS, TOKENS), -5.0)
    logits[..., EOS] = 10.0
    first = torch.tensor([True, False])
    ones = torch.ones(2)
    processed = process_logits(
        logits,
        torch.zeros(2, BOOKS, PENALTY_WINDOW, dtype=torch.long),
        torch.zeros(2, dtype=torch.long),
        ones,
        ones,
        ones,
        torch.full((2,), 20),
        first,
        EOS,
    )
    codes = draw(processed, torch.tensor([1, 1]), torch.tensor([0, 0]))
    assert not (codes[0] == EOS).any() and (codes[1] == EOS).all()


def test_draws_follow_the_distribution_and_depend_on_seed_and_index_only() -> None:
    probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    logits = probs.log().view(1, 1, 4).expand(4000, 1, 4).contiguous()
    seeds = torch.arange(4000)
    codes = draw(logits, seeds, torch.zeros(4000, dtype=torch.long))
    frequencies = torch.bincount(codes.view(-1), minlength=4).float() / 4000
    assert float((frequencies - probs).abs().max()) < 0.03
    # The same row (seed, index) draws the same code whatever rows surround it.
    again = draw(logits[10:20], seeds[10:20], torch.zeros(10, dtype=torch.long))
    assert torch.equal(again, codes[10:20])
    later = draw(logits[:100], seeds[:100], torch.ones(100, dtype=torch.long))
    assert not torch.equal(later, codes[:100])
