"""ChatTTS's GPT as a static-cache decoder: a prompt is prefilled into a slot, then one step
advances every active row at once, each at its own position (gpt-fast's shape).

The weights are the checkpoint's own tensors (`Transformer`, Embed), shared rather than copied; the
weight-normed heads are normalised once here instead of at every step. Active rows always occupy
slots 0..rows-1: a row that leaves is replaced by the last one (`move`), so a step works on a
prefix of the cache and never gathers it.
"""

from __future__ import annotations

import math
import mmap
from dataclasses import fields
from typing import Any

import torch
import torch.nn.functional as F

from workers.engines.chattts.runtime.weights import Layer, Transformer


def zeros(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A zeroed tensor; on the CPU, one that costs memory only where it is written. The KV cache
    of 8 slots of 3072 positions is 1.5 GB: `torch.zeros` writes all of it at start-up (3.9 s on
    the development CPU, and all of it resident at once). Pages of an anonymous mapping are zero
    by the kernel's guarantee and become resident as rows reach them."""
    nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    if device.type != "cpu" or nbytes == 0:
        return torch.zeros(shape, dtype=dtype, device=device)
    pages = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)  # not shmem
    return torch.frombuffer(pages, dtype=dtype).view(shape)


class StaticDecoder:
    """The transformer, its heads and a KV cache of `slots` rows of `context` positions."""

    def __init__(
        self,
        transformer: Transformer,
        embed: Any,
        slots: int,
        context: int,
        dtype: torch.dtype | None = None,
        device: torch.device | None = None,
    ) -> None:
        self.device = device or transformer.device
        self.dtype = dtype or transformer.norm.dtype
        self.heads, self.head_dim = transformer.heads, transformer.head_dim
        self.eps, self.hidden = transformer.eps, transformer.hidden
        self.slots, self.context = slots, context

        def w(t: torch.Tensor) -> torch.Tensor:  # the same storage when nothing changes
            return t.to(device=self.device, dtype=self.dtype)

        self.layers = [
            Layer(*(w(getattr(layer, f.name)) for f in fields(Layer)))
            for layer in transformer.layers
        ]
        self.norm = w(transformer.norm)
        self.inv_freq = transformer.inv_freq.float().to(self.device)
        with torch.no_grad():
            # Audio heads: weight norm evaluated once; logits stay in float32 as in ChatTTS.
            self.num_vq = len(embed.head_code)
            self.code_head = torch.cat([h.weight.detach().float() for h in embed.head_code])
            self.code_embed = torch.stack([e.weight.detach() for e in embed.emb_code])
        self.num_audio_tokens = int(self.code_embed.size(1))
        # Fault injection for tests: a real torch.OutOfMemoryError on a pass over more rows.
        self.oom_above: int | None = None
        shape = (len(self.layers), slots, self.heads, context, self.head_dim)
        self.k_cache = zeros(shape, self.dtype, self.device)
        self.v_cache = zeros(shape, self.dtype, self.device)

    def bytes_per_slot(self) -> int:
        return 2 * self.k_cache[:, 0].numel() * self.k_cache.element_size()

    # -- the transformer ---------------------------------------------------------------------------

    def _rms(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return weight * xf.to(x.dtype)

    def _rope(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin of shape [..., head_dim] for integer positions of any shape."""
        freqs = positions.float().unsqueeze(-1) * self.inv_freq
        angles = torch.cat((freqs, freqs), dim=-1)
        cos = angles.cos().to(self.dtype)
        sin = angles.sin().to(self.dtype)
        return cos, sin

    @staticmethod
    def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = x.size(-1) // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos + rotated * sin

    def _forward(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        write: Any,
        keys: Any,
        mask: torch.Tensor | None,
        causal: bool,
    ) -> torch.Tensor:
        """x [B, T, D]; `write(layer, k, v)` stores new keys/values, `keys(layer)` the K, V to
        attend over; returns the final-normed hidden states [B, T, D]."""
        b, t, _ = x.shape
        for i, layer in enumerate(self.layers):
            h = self._rms(x, layer.norm_attn)
            q = F.linear(h, layer.q).view(b, t, self.heads, self.head_dim).transpose(1, 2)
            k = F.linear(h, layer.k).view(b, t, self.heads, self.head_dim).transpose(1, 2)
            v = F.linear(h, layer.v).view(b, t, self.heads, self.head_dim).transpose(1, 2)
            q, k = self._rotate(q, cos, sin), self._rotate(k, cos, sin)
            write(i, k, v)
            k_all, v_all = keys(i)
            attn = F.scaled_dot_product_attention(
                q, k_all, v_all, attn_mask=mask, is_causal=causal and mask is None
            )
            x = x + F.linear(attn.transpose(1, 2).reshape(b, t, -1), layer.o)
            h = self._rms(x, layer.norm_mlp)
            x = x + F.linear(F.silu(F.linear(h, layer.gate)) * F.linear(h, layer.up), layer.down)
        return self._rms(x, self.norm)

    @torch.inference_mode()
    def prefill(self, slot: int, embeds: torch.Tensor) -> torch.Tensor:
        """Run a prompt [T, D] into `slot` (positions 0..T-1); the last hidden state [D]."""
        self._fault(1)
        t = embeds.size(0)
        positions = torch.arange(t, device=self.device)
        cos, sin = self._rope(positions)

        def write(i: int, k: torch.Tensor, v: torch.Tensor) -> None:
            self.k_cache[i, slot, :, :t] = k[0]
            self.v_cache[i, slot, :, :t] = v[0]

        def keys(i: int) -> tuple[torch.Tensor, torch.Tensor]:
            return self.k_cache[i, slot : slot + 1, :, :t], self.v_cache[i, slot : slot + 1, :, :t]

        x = embeds.to(self.dtype).unsqueeze(0)
        out = self._forward(x, cos, sin, write, keys, None, causal=True)
        return out[0, -1]

    @torch.inference_mode()
    def step(self, embeds: torch.Tensor, positions: torch.Tensor, span: int) -> torch.Tensor:
        """One token for each of rows 0..B-1 (embeds [B, D]) at its own position [B]; keys up to
        `span` positions are attended (all positions <= each row's own). Hidden states [B, D]."""
        rows = embeds.size(0)
        self._fault(rows)
        cos, sin = self._rope(positions.view(rows, 1, 1))  # broadcasts over heads
        index = torch.arange(rows, device=self.device)
        mask = (torch.arange(span, device=self.device) <= positions.view(rows, 1)).view(
            rows, 1, 1, span
        )

        def write(i: int, k: torch.Tensor, v: torch.Tensor) -> None:
            self.k_cache[i, index, :, positions] = k[:, :, 0]
            self.v_cache[i, index, :, positions] = v[:, :, 0]

        def keys(i: int) -> tuple[torch.Tensor, torch.Tensor]:
            return self.k_cache[i, :rows, :, :span], self.v_cache[i, :rows, :, :span]

        x = embeds.to(self.dtype).unsqueeze(1)
        return self._forward(x, cos, sin, write, keys, mask, causal=False)[:, 0]

    def _fault(self, rows: int) -> None:
        if self.oom_above is not None and rows > self.oom_above:
            raise torch.OutOfMemoryError(f"injected: a pass over {rows} rows > {self.oom_above}")

    def move(self, source: int, target: int, length: int) -> None:
        """Copy a row's cache (its first `length` positions) from one slot to another."""
        self.k_cache[:, target, :, :length] = self.k_cache[:, source, :, :length]
        self.v_cache[:, target, :, :length] = self.v_cache[:, source, :, :length]

    # -- heads and embeddings ---------------------------------------------------------------------

    def code_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Audio-code logits [B, num_vq, tokens] (float32) of hidden states [B, D]."""
        logits = F.linear(hidden.float(), self.code_head)
        return logits.view(hidden.size(0), self.num_vq, self.num_audio_tokens)

    def embed_codes(self, codes: torch.Tensor) -> torch.Tensor:
        """The input embedding [B, D] of one step's codes [B, num_vq]: summed over codebooks."""
        books = torch.arange(self.num_vq, device=codes.device)
        return self.code_embed[books, codes].sum(1)
