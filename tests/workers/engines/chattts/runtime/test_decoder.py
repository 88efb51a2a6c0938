"""The static-cache decoder against ChatTTS's own LlamaModel and heads, on the tiny checkpoint."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tests.workers.engines.chattts.conftest import requires_chattts
from tests.workers.engines.chattts.runtime.helpers import mixed_prompts, prompt
from workers.engines.chattts.runtime.decoder import StaticDecoder
from workers.engines.chattts.runtime.weights import Transformer

pytestmark = [pytest.mark.chattts, requires_chattts]
# float32 on the CPU: our attention and HF's differ in summation order only.
TOLERANCE = 1e-4


def reference_hidden(chat: Any, embeds: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        out = chat.gpt.gpt(inputs_embeds=embeds.unsqueeze(0), use_cache=False)
    hidden: torch.Tensor = out.last_hidden_state[0]
    return hidden


def reference_logits(chat: Any, hidden: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        return torch.stack([head(hidden.float()) for head in chat.embed.head_code], -2)


def test_prefill_and_step_give_chatttss_hidden_states_and_logits(engine: Any) -> None:
    chat = engine.chat
    decoder = StaticDecoder(Transformer.from_llama(chat.gpt.gpt), chat.embed, slots=2, context=256)
    embeds = prompt(chat, "你好，欢迎使用语音合成。")
    hidden = decoder.prefill(1, embeds)
    expected = reference_hidden(chat, embeds)
    torch.testing.assert_close(hidden, expected[-1], atol=TOLERANCE, rtol=0)
    logits = decoder.code_logits(hidden.unsqueeze(0))[0]
    torch.testing.assert_close(logits, reference_logits(chat, expected[-1]), atol=TOLERANCE, rtol=0)
    # Three steps of codes through the cache, against the whole sequence recomputed.
    codes = torch.tensor([[5, 17, 300, 2], [9, 9, 9, 9], [620, 0, 1, 44]], device=decoder.device)
    sequence = embeds
    for i, step_codes in enumerate(codes):
        step_embed = decoder.embed_codes(step_codes.unsqueeze(0))
        # Row 1 alone is active: move it to slot 0 first (rows occupy the slots' prefix).
        if i == 0:
            decoder.move(1, 0, embeds.size(0))
        position = torch.tensor([embeds.size(0) + i], device=decoder.device)
        stepped = decoder.step(step_embed, position, embeds.size(0) + i + 1)[0]
        sequence = torch.cat([sequence, step_embed.to(sequence.dtype)])
        torch.testing.assert_close(
            stepped, reference_hidden(chat, sequence)[-1], atol=TOLERANCE, rtol=0
        )


def test_rows_at_different_positions_step_as_they_would_alone(engine: Any) -> None:
    chat = engine.chat
    prompts = mixed_prompts(chat, 4)
    together = StaticDecoder(Transformer.from_llama(chat.gpt.gpt), chat.embed, slots=4, context=256)
    lasts = [together.prefill(i, p) for i, p in enumerate(prompts)]
    codes = torch.tensor([[1, 2, 3, 4]] * 4, device=together.device)
    positions = torch.tensor([p.size(0) for p in prompts], device=together.device)
    span = int(positions.max()) + 1
    batched = together.step(together.embed_codes(codes), positions, span)
    for i, p in enumerate(prompts):
        alone = StaticDecoder(
            Transformer.from_llama(chat.gpt.gpt), chat.embed, slots=1, context=256
        )
        torch.testing.assert_close(alone.prefill(0, p), lasts[i], atol=TOLERANCE, rtol=0)
        single = alone.step(alone.embed_codes(codes[:1]), positions[i : i + 1], span)
        torch.testing.assert_close(batched[i], single[0], atol=TOLERANCE, rtol=0)
