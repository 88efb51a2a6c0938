"""The transformer's tensors and shape, read from a LlamaModel's state dict and its config.json
(no transformers import: the decode runtime starts without it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class Layer:
    norm_attn: torch.Tensor
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    o: torch.Tensor
    norm_mlp: torch.Tensor
    gate: torch.Tensor
    up: torch.Tensor
    down: torch.Tensor


@dataclass(frozen=True)
class Transformer:
    layers: list[Layer]
    norm: torch.Tensor
    heads: int
    head_dim: int
    eps: float
    hidden: int
    max_positions: int
    inv_freq: torch.Tensor  # float32 rotary frequencies [head_dim / 2]

    @classmethod
    def from_tensors(cls, tensors: dict[str, torch.Tensor], config: dict[str, Any]) -> Transformer:
        """From LlamaModel's state dict (keys `layers.N.self_attn.q_proj.weight` ..., `norm.weight`)
        and config; ValueError for what ChatTTS's GPT never uses (grouped-query attention, scaled
        rotary embeddings)."""
        heads = int(config["num_attention_heads"])
        if int(config.get("num_key_value_heads") or heads) != heads:
            raise ValueError("grouped-query attention is not used by ChatTTS and not supported")
        hidden = int(config["hidden_size"])
        head_dim = int(config.get("head_dim") or hidden // heads)
        rope = dict(config.get("rope_parameters") or config.get("rope_scaling") or {})
        kind = rope.get("rope_type", rope.get("type", "default"))
        if kind != "default":
            raise ValueError(f"rotary embeddings of type {kind!r} are not supported")
        theta = float(rope.get("rope_theta", config.get("rope_theta", 10000.0)))
        # LlamaRotaryEmbedding's default frequencies, computed the same way.
        exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim
        inv_freq = 1.0 / (theta**exponents)

        def t(key: str) -> torch.Tensor:
            return tensors[key].detach()

        count = int(config["num_hidden_layers"])
        layers = [
            Layer(
                t(f"layers.{i}.input_layernorm.weight"),
                t(f"layers.{i}.self_attn.q_proj.weight"),
                t(f"layers.{i}.self_attn.k_proj.weight"),
                t(f"layers.{i}.self_attn.v_proj.weight"),
                t(f"layers.{i}.self_attn.o_proj.weight"),
                t(f"layers.{i}.post_attention_layernorm.weight"),
                t(f"layers.{i}.mlp.gate_proj.weight"),
                t(f"layers.{i}.mlp.up_proj.weight"),
                t(f"layers.{i}.mlp.down_proj.weight"),
            )
            for i in range(count)
        ]
        return cls(
            layers,
            t("norm.weight"),
            heads,
            head_dim,
            float(config["rms_norm_eps"]),
            hidden,
            int(config["max_position_embeddings"]),
            inv_freq,
        )

    @classmethod
    def from_llama(cls, llama: Any) -> Transformer:
        """From a loaded LlamaModel (its own tensors, shared)."""
        return cls.from_tensors(dict(llama.state_dict()), llama.config.to_dict())

    @property
    def device(self) -> torch.device:
        return self.norm.device
