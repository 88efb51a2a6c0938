"""ChatTTS's modules built around the checkpoint's own tensors: nothing initialised at random to be
overwritten, every weight a view of its safetensors file (mapped, so the workers of a host share
one copy in the page cache); ChatTTS's Chat and the recording encoder only when first needed.

It replaces `Chat._load`, which builds each module with random weights, copies the checkpoint
into them and reads the GPT through `LlamaModel.from_pretrained` (2.2 s of loading on the
development CPU, bench/coldstart.py). The tests compare every tensor with what `_load` builds.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file
from torch import nn

from workers.engines.base import EngineError
from workers.engines.chattts.library.sampling import FRAMES_PER_TOKEN, SeededGenerate
from workers.engines.chattts.loading import imports
from workers.engines.chattts.runtime.weights import Transformer

HOMOPHONES = "homophones_map.json"  # the normalizer's table, in ChatTTS's package data
# torch.nn.init's in-place initialisers: during `skipped_init` each leaves its tensor as it is.
INITIALISERS = (
    "uniform_",
    "normal_",
    "trunc_normal_",
    "constant_",
    "ones_",
    "zeros_",
    "eye_",
    "dirac_",
    "xavier_uniform_",
    "xavier_normal_",
    "kaiming_uniform_",
    "kaiming_normal_",
    "orthogonal_",
    "sparse_",
)


def _leave(tensor: torch.Tensor, *_args: Any, **_kwargs: Any) -> torch.Tensor:
    return tensor


@contextmanager
def skipped_init() -> Iterator[None]:
    """Modules built in this block get allocated, uninitialised parameters (`load` then replaces
    every one). Written here because torch has no global switch (`nn.utils.skip_init` takes one
    module class at a time) and the meta device would lose buffers that modules compute when they
    are built and no checkpoint holds (mel filters, windows). Only the engine thread builds modules
    (at load, and the recording encoder on first use), so no other thread sees the patch."""
    saved = {name: getattr(nn.init, name) for name in INITIALISERS}
    try:
        for name in INITIALISERS:
            setattr(nn.init, name, _leave)
        yield
    finally:
        for name, initialiser in saved.items():
            setattr(nn.init, name, initialiser)


def load(module: nn.Module, path: Path, device: torch.device) -> nn.Module:
    """`module` with the file's tensors themselves (`assign`): safetensors' `load_file` gives
    views of the mapped file, not copies."""
    return assign(module, load_file(str(path)), str(path), device)


def assign(
    module: nn.Module, tensors: dict[str, torch.Tensor], source: str, device: torch.device
) -> nn.Module:
    """Give `module` these tensors themselves (strict: every parameter and persistent buffer,
    nothing more), then move it to the device (a copy off the CPU, nothing on it)."""
    try:
        module.load_state_dict(tensors, strict=True, assign=True)
    except RuntimeError as exc:
        raise EngineError(f"{source} does not fit the model's architecture: {exc}") from exc
    for name, tensor in [*module.named_parameters(), *module.named_buffers()]:
        if tensor.is_meta:
            raise EngineError(f"{source} leaves {name} without a value")
    return module.to(device).eval()


@dataclass
class Model:
    """The modules the decode runtime uses, without ChatTTS's Chat (see `imports.py`); the same
    attribute names as a Chat's, so that either serves `prompt.py`."""

    config: Any  # ChatTTS's Config
    device: torch.device
    root: Path
    normalizer: Any
    tokenizer: Any
    speaker: Any
    embed: nn.Module
    decoder: nn.Module
    vocos: nn.Module
    gpt_config: dict[str, Any]  # asset/gpt/config.json
    gpt_tensors: dict[str, torch.Tensor]  # mapped from asset/gpt/model.safetensors, on the CPU
    transformer: Transformer

    encoder: nn.Module | None = None  # `recording_encoder()`, once built

    @property
    def device_gpt(self) -> torch.device:
        return self.device

    def recording_encoder(self) -> nn.Module:
        """The DVAE with its quantizer, which encodes reference recordings: built on first use
        (only voice registration from a recording needs it)."""
        if self.encoder is None:
            self.encoder = _dvae(
                self.config, self.root / self.config.path.dvae_ckpt_path, self.device
            )
        return self.encoder


def build(config: Any, root: Path, device: torch.device, logger: logging.Logger) -> Model:
    """The runtime's modules from the verified checkpoint under `root`, as `Chat._load` builds
    them; `config` is ChatTTS's Config with any manifest overrides applied."""
    imports.partial()
    from ChatTTS.model.dvae import DVAE
    from ChatTTS.model.embed import Embed
    from ChatTTS.model.speaker import Speaker
    from ChatTTS.model.tokenizer import Tokenizer
    from ChatTTS.norm import Normalizer
    from vocos import Vocos
    from vocos.pretrained import instantiate_class

    paths = {key: root / relative for key, relative in asdict(config.path).items()}
    with skipped_init():
        vocos = Vocos(
            feature_extractor=instantiate_class(
                args=(), init=asdict(config.vocos.feature_extractor)
            ),
            backbone=instantiate_class(args=(), init=asdict(config.vocos.backbone)),
            head=instantiate_class(args=(), init=asdict(config.vocos.head)),
        )
        decoder = DVAE(
            decoder_config=asdict(config.decoder), dim=config.decoder.idim, device=device
        )
        embed = Embed(
            config.embed.hidden_size,
            config.embed.num_audio_tokens,
            config.embed.num_text_tokens,
            config.embed.num_vq,
        )
    gpt_folder = paths["gpt_ckpt_path"]
    gpt_config = json.loads((gpt_folder / "config.json").read_text("utf-8"))
    gpt_tensors = {
        key: tensor  # on the CPU, mapped: the decoder and the Chat's LlamaModel take their copies
        for key, tensor in load_file(str(gpt_folder / "model.safetensors")).items()
        if key != "embed_tokens.weight"  # ChatTTS embeds tokens with its own Embed
    }
    return Model(
        config=config,
        device=device,
        root=root,
        normalizer=Normalizer(str(resources.files("ChatTTS") / "res" / HOMOPHONES), logger),
        tokenizer=Tokenizer(str(paths["tokenizer_path"])),
        speaker=Speaker(config.gpt.hidden_size, config.spk_stat, device),
        embed=load(embed, paths["embed_path"], device),
        decoder=load(decoder, paths["decoder_ckpt_path"], device),
        vocos=load(vocos, paths["vocos_ckpt_path"], device),
        gpt_config=gpt_config,
        gpt_tensors=gpt_tensors,
        transformer=Transformer.from_tensors(gpt_tensors, gpt_config),
    )


def chat_around(model: Model, compile: bool, logger: logging.Logger) -> Any:
    """A ChatTTS Chat (our BatchChat) holding `model`'s modules, for what needs all of ChatTTS:
    refinement and the library runtime. Imports the rest of ChatTTS; its GPT is a LlamaModel over
    the checkpoint's mapped tensors (on the CPU in float32, the very ones the runtime uses; on a
    GPU, copied there now rather than at start-up)."""
    imports.complete()
    from ChatTTS.model.gpt import GPT

    from workers.engines.chattts.library.chat import BatchChat

    chat = BatchChat(logger)
    chat.config = model.config
    chat.device = chat.device_gpt = model.device
    chat.compile = compile
    chat.normalizer, chat.tokenizer, chat.speaker = model.normalizer, model.tokenizer, model.speaker
    chat.embed, chat.decoder, chat.vocos = model.embed, model.decoder, model.vocos
    gpt = GPT(
        gpt_config=asdict(model.config.gpt),
        embed=model.embed,
        device=model.device,
        device_gpt=model.device,
        logger=logger,
    ).eval()
    gpt.gpt = _llama(model.gpt_config, model.gpt_tensors, model.device)
    gpt.prepare(compile=compile and model.device.type == "cuda")
    gpt.generate = SeededGenerate(gpt.generate, chat)
    chat.gpt = gpt
    chat.samples_per_token = FRAMES_PER_TOKEN * int(model.config.vocos.head.init_args.hop_length)
    chat.dvae_factory = model.recording_encoder
    return chat


def _llama(config: dict[str, Any], tensors: dict[str, torch.Tensor], device: torch.device) -> Any:
    """ChatTTS's transformer as a LlamaModel without its token embedding, its parameters the
    given tensors. Built on the meta device, so nothing is allocated before they take their
    places; the rotary frequencies, the one buffer not saved, are computed for real."""
    from transformers import LlamaConfig, LlamaModel
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    llama_config = LlamaConfig.from_dict(config)
    with torch.device("meta"):
        llama = LlamaModel(llama_config)
    llama.rotary_emb = LlamaRotaryEmbedding(llama_config)
    del llama.embed_tokens
    return assign(llama, tensors, "asset/gpt/model.safetensors", device)


def _dvae(cfg: Any, path: Path, device: torch.device) -> nn.Module:
    from ChatTTS.model.dvae import DVAE

    with skipped_init():
        module = DVAE(
            decoder_config=asdict(cfg.dvae.decoder),
            encoder_config=asdict(cfg.dvae.encoder),
            vq_config=asdict(cfg.dvae.vq),
            dim=cfg.dvae.decoder.idim,
            device=device,
        )
    return load(module, path, device)
