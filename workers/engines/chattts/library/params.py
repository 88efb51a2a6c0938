"""What one ChatTTS `infer` is given: the speed and sentence prompts, fresh sampling parameters,
per-row generators, and speaker embeddings drawn from a seed."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from core.queue.job import SynthesisRequest
from core.voices.chattts import VoiceData, b14_decode, decode_embedding

if TYPE_CHECKING:  # ChatTTS itself is imported where it is used (imports.py: in part at start)
    import ChatTTS

REFINE_MAX_NEW_TOKEN = 384  # ChatTTS's default for the refinement pass
REPETITION_PENALTY = 1.05  # ChatTTS's default for audio codes


def speed_level(speed: float) -> int:
    """ChatTTS's `[speed_N]` (0-9, 5 = normal) for a speed factor of 0.5-2.0."""
    level = round(10 * (speed - 0.5)) if speed <= 1.0 else 5 + round(4 * (speed - 1.0))
    return min(9, max(0, level))


def infer_params(
    request: SynthesisRequest, voice: VoiceData, max_new_token: int
) -> tuple[ChatTTS.Chat.InferCodeParams, ChatTTS.Chat.RefineTextParams]:
    """Fresh parameter objects for one `infer` (ChatTTS mutates the ones it is given)."""
    import ChatTTS

    code = ChatTTS.Chat.InferCodeParams(
        prompt=f"[speed_{speed_level(request.speed)}]",
        spk_emb=voice.spk_emb,
        spk_smp=voice.spk_smp,
        txt_smp=voice.txt_smp,
        temperature=request.temperature,
        top_P=request.top_p,
        top_K=request.top_k,
        repetition_penalty=REPETITION_PENALTY,
        max_new_token=max_new_token,
        show_tqdm=False,
    )
    # The sentence prompt ("[oral_2][laugh_0][break_6]") steers the refinement pass, as in
    # ChatTTS: `RefineTextParams.prompt` follows [Pbreak] (`Speaker.decorate_text_prompts`). The
    # code pass's prompt stays the speed token (`InferCodeParams.prompt`), as ChatTTS has it.
    refine = ChatTTS.Chat.RefineTextParams(
        prompt=request.prompt or "",
        top_P=request.top_p,
        top_K=request.top_k,
        max_new_token=REFINE_MAX_NEW_TOKEN,
        show_tqdm=False,
    )
    return code, refine


def row_generators(seeds: list[int], device: torch.device) -> list[torch.Generator]:
    """One generator per row of a batch, on the engine's device, seeded with the row's seed."""
    return [torch.Generator(device=device).manual_seed(s) for s in seeds]


def draw_speaker(spk_stat: str, seed: int) -> str:
    """A speaker embedding drawn like `Speaker.sample_random`, from a local seeded generator."""
    from ChatTTS.model.speaker import Speaker

    stat = torch.from_numpy(np.frombuffer(b14_decode(spk_stat), dtype=np.float16).copy())
    std, mean = stat.chunk(2)
    generator = torch.Generator("cpu").manual_seed(seed)
    values = torch.randn(std.numel(), generator=generator, dtype=torch.float16)
    encoded: str = Speaker._encode(values.mul_(std).add_(mean))
    return encoded


def draw_seed_speaker(spk_stat: str, seed: int) -> str:
    """A seed voice's embedding, drawn as ChatTTS-ui draws a voice number (`torch.manual_seed`,
    then float32 `randn * std + mean`), from a local generator: a seed users share is the same
    voice here, on every worker, after every restart."""
    from ChatTTS.model.speaker import Speaker

    stat = torch.from_numpy(np.frombuffer(b14_decode(spk_stat), dtype=np.float16).copy()).float()
    std, mean = stat.chunk(2)
    generator = torch.Generator("cpu").manual_seed(seed)
    values = torch.randn(std.numel(), generator=generator) * std + mean
    encoded: str = Speaker._encode(values.half())
    return encoded


def blend_speakers(embeddings: list[tuple[str, float]]) -> str:
    """Speaker embeddings mixed by weight (their weighted mean)."""
    from ChatTTS.model.speaker import Speaker

    total = sum(weight for _, weight in embeddings)
    mixed = sum(
        torch.from_numpy(decode_embedding(embedding).astype(np.float32)) * (weight / total)
        for embedding, weight in embeddings
    )
    assert isinstance(mixed, torch.Tensor)
    encoded: str = Speaker._encode(mixed.half())
    return encoded
