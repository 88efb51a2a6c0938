"""A row's prompt as ChatTTS builds it for code generation: the decorated text, tokenized, embedded,
with the speaker embedding written at the `[spk_emb]` position (see ChatTTS's `_infer_code`).
The engine's side of the runtime: the runtime itself starts from the embeddings."""

from __future__ import annotations

from typing import Any

import torch

from core.voices.chattts import VoiceData


def prompt_embeddings(chat: Any, text: str, voice: VoiceData, speed_prompt: str) -> torch.Tensor:
    """Input embeddings [T, D] of one row's prompt, on the GPT's device. `chat`: a ChatTTS Chat or
    the runtime's modules (assembly.Model), which have the same names."""
    decorated = chat.speaker.decorate_code_prompts(
        [text], speed_prompt, voice.txt_smp, voice.spk_emb
    )
    sample = chat.speaker.decode_prompt(voice.spk_smp) if voice.spk_smp is not None else None
    input_ids, _mask, text_mask = chat.tokenizer.encode(
        decorated, chat.config.gpt.num_vq, prompt=sample, device=chat.device_gpt
    )
    with torch.inference_mode():
        embeds = chat.embed(input_ids, text_mask)
        if voice.spk_emb is not None:
            chat.speaker.apply(
                embeds, voice.spk_emb, input_ids, chat.tokenizer.spk_emb_ids, chat.device_gpt
            )
    out: torch.Tensor = embeds[0]
    return out


def spoken_text(model: Any, text: str, refine: Any | None = None, chat: Any = None) -> str:
    """The text as ChatTTS's `infer` would speak it: through `model`'s normalizer and, with
    `refine` (RefineTextParams), the refinement pass of `chat` (a ChatTTS Chat, sampled with the
    generators of `chat.batch`), whose
    prompt is the request's sentence prompt ("[oral_2][laugh_0][break_6]" after [Pbreak]). As in
    ChatTTS, the refined text keeps its word-level tokens ([uv_break], [laugh] ...) and drops the
    sentence-level ones (ids from [break_0] on)."""
    text = model.normalizer(text, True, True, None)
    if refine is None:
        return text
    if chat is None:
        raise ValueError("refinement needs ChatTTS's Chat")
    refined = chat._refine_text([text], chat.device, refine)
    tokens = [ids[ids.less(chat.tokenizer.break_0_ids)] for ids in refined.ids]
    out: str = chat.tokenizer.decode(tokens)[0]
    refined.destroy()
    return out
