"""Random-weight ChatTTS checkpoints built from ChatTTS's own classes: tiny (tests), full (bench).

Each has the real file layout (`asset/` tree, safetensors, a BERT tokenizer carrying ChatTTS's 50
control tokens in their real order after its base vocabulary) and a `chattts-online.json` manifest
with its architecture and checksums, so it loads through the production loader unchanged.
"""

from __future__ import annotations

import json
import string
from dataclasses import asdict
from pathlib import Path
from typing import Any

from workers.engines.chattts.loading.loader import (
    ASSET_FILES,
    apply_config,
    checksum_key,
    sha256_file,
)
from workers.engines.chattts.loading.loader import MANIFEST as MANIFEST  # bench/ reads it here

# The control tokens of ChatTTS's tokenizer, in the order they follow the 21128-token BERT
# vocabulary in the published `asset/tokenizer` (ids 21128-21177). Code relies on that order:
# refinement drops every id >= the id of [break_0].
CONTROL_TOKENS: tuple[str, ...] = (
    "[Sasr]",
    "[Pasr]",
    "[Easr]",
    "[Stts]",
    "[Ptts]",
    "[Etts]",
    "[Sbreak]",
    "[Pbreak]",
    "[Ebreak]",
    "[uv_break]",
    "[v_break]",
    "[lbreak]",
    "[llbreak]",
    "[undefine]",
    "[laugh]",
    "[spk_emb]",
    "[empty_spk]",
    "[music]",
    "[pure]",
    *(f"[break_{i}]" for i in range(8)),
    *(f"[laugh_{i}]" for i in range(3)),
    *(f"[oral_{i}]" for i in range(10)),
    *(f"[speed_{i}]" for i in range(10)),
)
# A few hundred common characters stand in for BERT's 21128 entries: enough for test texts.
_CJK = (
    "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说"
    "产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点"
    "从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原"
    "又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革"
    "位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强"
    "放决西被干做必战先回则任取据处队南给色光门即保治北造百规热领七海口东导器压志世金增争济阶油思术极交"
    "受联什认六共权收证改清美再采转更单风切打白教速花带安场身车例真务具万每目至达走积示议声报斗完类八离"
    "华名确才科张信马节话米整空元况今集温传土许步群广石记需段研界拉林律叫且究观越织装影算低持音众书布复"
    "容儿须际商非验连断深难近矿千周委素技备半办青省列习响约支般史感劳便团往酸历市克何除消构府称太准精值"
    "号率族维划选标写存候毛亲快效斯院查江型眼王按格养易置派层片始却专状育厂京识适属圆包火住调满县局照参"
    "红细引听该铁价严你好世界欢迎使用语音合成今天天气很好我们"
)
_BASE_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
# Architecture of the tiny model. The GPT keeps ChatTTS's real width (768) and audio vocabulary
# so that the stored built-in speaker embeddings (768 values) apply unchanged; everything else
# shrinks to one layer and a few dozen channels, so one generation step takes about a millisecond.
HIDDEN = 768
NUM_VQ = 4
NUM_AUDIO_TOKENS = 626  # 625 FSQ codes (levels 5*5*5*5) + the end-of-audio token
# How rows end (see _shape_eos): the component every input embedding shares, the number of
# leading tokens per output head, and their logit scale (about 5, against random logits of
# about 0.6), so that rows end after about 12 tokens on average.
EMBED_BIAS = 5.0
LIKELY_TOKENS = 16
LIKELY_GAIN = 0.5
LIKELY_SPREAD = 0.08
DEFAULT_MAX_NEW_TOKEN = 96
FULL_BASE_VOCAB = 21128  # bert-base-chinese, the base of ChatTTS's tokenizer


def _vocab(size: int | None = None) -> list[str]:
    """A BERT-style base vocabulary; `size` pads it with unused entries (the real one: 21128)."""
    chars = list(dict.fromkeys(_CJK))
    ascii_tokens = list(string.ascii_lowercase) + [f"##{c}" for c in string.ascii_lowercase]
    punct = list("，。、,.!?;:'\"-()[]") + list(string.digits)
    vocab = [*_BASE_SPECIALS, *ascii_tokens, *punct, *chars]
    if size is not None:
        vocab += [f"[unused{i}]" for i in range(size - len(vocab))]
    return vocab


def _tiny_config(num_text_tokens: int) -> dict[str, Any]:
    small_conv = {"hidden": 32, "n_layer": 1, "bn_dim": 16}
    return {
        "gpt": {
            "hidden_size": HIDDEN,
            "intermediate_size": 128,
            "num_attention_heads": 12,
            "num_hidden_layers": 1,
            "max_position_embeddings": 4096,
            "num_audio_tokens": NUM_AUDIO_TOKENS,
            "num_text_tokens": num_text_tokens,
            "num_vq": NUM_VQ,
        },
        "embed": {
            "hidden_size": HIDDEN,
            "num_audio_tokens": NUM_AUDIO_TOKENS,
            "num_text_tokens": num_text_tokens,
            "num_vq": NUM_VQ,
        },
        # The decoder turns each GPT hidden state into two mel frames: idim = hidden / 2.
        "decoder": {"idim": HIDDEN // 2, "odim": HIDDEN // 2, **small_conv},
        "dvae": {
            "encoder": {"idim": 64, "odim": 128, **small_conv},
            "decoder": {"idim": 64, "odim": 64, **small_conv},
            "vq": {"dim": 128, "levels": [5, 5, 5, 5], "G": 2, "R": 2},
        },
        "vocos": {
            "backbone": {"input_channels": 100, "dim": 32, "intermediate_dim": 64, "num_layers": 1},
            "head": {"dim": 32, "n_fft": 1024, "hop_length": 256, "padding": "center"},
        },
    }


def _full_config(num_text_tokens: int) -> dict[str, Any]:
    """ChatTTS 0.2.5's published architecture (its Config defaults)."""
    from ChatTTS.config import config as cc

    cfg = cc.Config()
    vocos = asdict(cfg.vocos)
    return {
        "gpt": {**asdict(cfg.gpt), "num_text_tokens": num_text_tokens},
        "embed": {**asdict(cfg.embed), "num_text_tokens": num_text_tokens},
        "decoder": asdict(cfg.decoder),
        "dvae": {
            **asdict(cfg.dvae),
            "vq": {**asdict(cfg.dvae.vq), "levels": list(cfg.dvae.vq.levels)},
        },
        "vocos": {
            part: vocos[part]["init_args"] for part in ("feature_extractor", "backbone", "head")
        },
    }


def _save(module: Any, path: Path) -> None:
    from safetensors.torch import save_file

    state = {k: v.detach().contiguous().clone() for k, v in module.state_dict().items()}
    save_file(state, str(path))


def _write_tokenizer(directory: Path, base_size: int | None = None) -> int:
    from transformers import BertTokenizerFast  # type: ignore[attr-defined]  # lazy export

    vocab = {token: i for i, token in enumerate(_vocab(base_size))}
    tokenizer = BertTokenizerFast(vocab=vocab)
    tokenizer.add_tokens(list(CONTROL_TOKENS), special_tokens=True)
    tokenizer.save_pretrained(str(directory))
    # ChatTTS's checksum list names special_tokens_map.json; newer transformers stop writing it.
    special = directory / "special_tokens_map.json"
    if not special.exists():
        special.write_text(
            json.dumps(
                {
                    "cls_token": "[CLS]",
                    "mask_token": "[MASK]",
                    "pad_token": "[PAD]",
                    "sep_token": "[SEP]",
                    "unk_token": "[UNK]",
                },
                indent=2,
            )
        )
    for name in list(directory.iterdir()):
        if name.name not in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
            name.unlink()
    ids = tokenizer.convert_tokens_to_ids(list(CONTROL_TOKENS))
    assert ids == list(range(len(vocab), len(vocab) + len(CONTROL_TOKENS))), ids
    return len(tokenizer)


def build_tiny_checkpoint(
    path: str | Path, seed: int = 0, max_new_token: int = DEFAULT_MAX_NEW_TOKEN
) -> Path:
    """Write a complete tiny random-weight checkpoint under `path` (usable as CHATTTS_MODEL_DIR).

    `max_new_token` goes into the manifest: the engine's audio-token budget per segment for this
    checkpoint (its rows end after about 8 tokens; the budget bounds the rare long one).
    """
    return build_checkpoint(path, "tiny", seed=seed, max_new_token=max_new_token)


def build_checkpoint(
    path: str | Path,
    size: str = "tiny",
    seed: int = 0,
    max_new_token: int | None = DEFAULT_MAX_NEW_TOKEN,
    shape_eos: bool = True,
) -> Path:
    """Write a random-weight checkpoint: `tiny` (tests) or `full` (ChatTTS's real architecture,
    about 1 GB, for benchmarks). Without `shape_eos` no row ever ends: each runs its budget.
    """
    import torch
    from ChatTTS.config import config as cc
    from ChatTTS.model import DVAE, Embed
    from transformers import LlamaConfig, LlamaModel
    from vocos import Vocos
    from vocos.pretrained import instantiate_class

    root = Path(path)
    asset = root / "asset"
    (asset / "gpt").mkdir(parents=True, exist_ok=True)
    (asset / "tokenizer").mkdir(parents=True, exist_ok=True)
    full = size == "full"
    num_text_tokens = _write_tokenizer(asset / "tokenizer", FULL_BASE_VOCAB if full else None)
    cfg = _full_config(num_text_tokens) if full else _tiny_config(num_text_tokens)

    # Module constructors draw from the global RNG: fork it so building leaves no trace.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        config = cc.Config()
        apply_config(config, {"vocos": cfg["vocos"]})  # as the loader will read it
        vocos_cfg = config.vocos
        vocos = Vocos(
            feature_extractor=instantiate_class((), asdict(vocos_cfg.feature_extractor)),
            backbone=instantiate_class((), asdict(vocos_cfg.backbone)),
            head=instantiate_class((), asdict(vocos_cfg.head)),
        )
        _save(vocos, asset / "Vocos.safetensors")

        d = cfg["dvae"]
        dvae = DVAE(
            decoder_config=d["decoder"],
            encoder_config=d["encoder"],
            vq_config={**d["vq"], "levels": tuple(d["vq"]["levels"])},
            dim=d["decoder"]["idim"],
        )
        _save(dvae, asset / "DVAE.safetensors")
        decoder = DVAE(decoder_config=cfg["decoder"], dim=cfg["decoder"]["idim"], coef=str(dvae))
        _save(decoder, asset / "Decoder.safetensors")

        e = cfg["embed"]
        embed = Embed(e["hidden_size"], e["num_audio_tokens"], e["num_text_tokens"], e["num_vq"])
        if shape_eos:
            _shape_eos(embed, num_text_tokens)
        else:
            _never_end(embed)
        _save(embed, asset / "Embed.safetensors")

        g = cfg["gpt"]
        llama = LlamaModel(
            LlamaConfig(
                hidden_size=g["hidden_size"],
                intermediate_size=g["intermediate_size"],
                num_attention_heads=g["num_attention_heads"],
                num_hidden_layers=g["num_hidden_layers"],
                max_position_embeddings=g["max_position_embeddings"],
                vocab_size=16,  # ChatTTS deletes the LLaMA's own token embedding after loading
            )
        )
        llama.save_pretrained(str(asset / "gpt"))
    for extra in (asset / "gpt").iterdir():
        if extra.name not in ("config.json", "model.safetensors"):
            extra.unlink()

    manifest: dict[str, Any] = {
        "format": 1,
        "description": f"random-weight {size} checkpoint (built by {__name__})",
        "config": cfg,
        "sha256": _checksums(root),
    }
    if max_new_token is not None:
        manifest["max_new_token"] = max_new_token
    (root / MANIFEST).write_text(json.dumps(manifest, indent=2))
    return root


def _shape_eos(embed: Any, num_text_tokens: int) -> None:
    """Give every row a steady chance to end, whatever its text and seed.

    Random weights alone end a row only on some token sequences, so rows either stop at once or
    never. Here every input embedding gets the same component along one direction, so the
    normalized hidden state always points partly that way; in each output head a few "likely"
    tokens point exactly that way and so always lead. The end token joins them in the first audio
    head and in the text head: each step then ends a row with a steady probability (about 1 in
    12 after top-P), independent of the text. The sampled tokens still vary among the likely ones.
    """
    import torch

    direction = torch.randn(HIDDEN)
    direction /= direction.norm()
    eos_text = num_text_tokens - len(CONTROL_TOKENS) + CONTROL_TOKENS.index("[Ebreak]")
    base_vocab = num_text_tokens - len(CONTROL_TOKENS)
    with torch.no_grad():
        for table in (*embed.emb_code, embed.emb_text):
            table.weight += EMBED_BIAS * direction
        heads = [
            (head, NUM_AUDIO_TOKENS - 1, NUM_AUDIO_TOKENS - 1, q == 0)
            for q, head in enumerate(embed.head_code)
        ]
        heads.append((embed.head_text, base_vocab, eos_text, True))
        for head, choices, eos, can_end in heads:
            weights = head.parametrizations.weight
            likely = torch.randperm(choices)[:LIKELY_TOKENS].tolist()
            # Irregular gains: exact ties (also after the repetition penalty divides a logit by
            # 1.05^n) would let float noise reorder top-P's sort, so that a row batched with
            # others could sample differently from the same row alone.
            gains = 1 + LIKELY_SPREAD * torch.rand(LIKELY_TOKENS)
            for token, gain in zip(likely, gains.tolist(), strict=True):
                weights.original1[token] = direction
                weights.original0[token] = LIKELY_GAIN * gain
            if can_end:
                weights.original1[eos] = direction
                weights.original0[eos] = LIKELY_GAIN * (1 + LIKELY_SPREAD * 0.77)


def _never_end(embed: Any) -> None:
    """Zero the end-of-audio rows: a logit of 0 never reaches the top 20 of random logits, so
    every row runs its whole budget (benchmarks measure the engine, not random endings)."""
    import torch

    with torch.no_grad():
        for head in embed.head_code:
            head.parametrizations.weight.original0[NUM_AUDIO_TOKENS - 1] = 0.0


def _checksums(root: Path) -> dict[str, str]:
    """Checksums keyed the way ChatTTS's own sha256_map.json keys the published files."""
    return {checksum_key(relative): sha256_file(root / relative) for relative in ASSET_FILES}


if (
    __name__ == "__main__"
):  # pragma: no cover - manual use: python -m workers.engines.chattts.loading.checkpoint DIR
    import sys

    print(build_tiny_checkpoint(sys.argv[1]))
