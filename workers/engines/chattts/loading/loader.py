"""Find, verify and load ChatTTS weights from CHATTTS_MODEL_DIR; never downloads anything.

A checkpoint is a directory holding ChatTTS's `asset/` tree, found directly or inside a Hugging
Face cache holding `2Noise/ChatTTS`. Files are verified against ChatTTS's published checksums, or
against the `chattts-online.json` manifest that a custom (e.g. test) checkpoint carries along with
its architecture. Importing this module does not import torch.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from workers.engines.base import EngineError
from workers.engines.chattts.loading import stamp

log = logging.getLogger(__name__)

MANIFEST = "chattts-online.json"
HF_REPO_DIR = "models--2Noise--ChatTTS"
# Every file ChatTTS's loader reads, relative to the checkpoint root (its `config.path`).
ASSET_FILES: tuple[str, ...] = (
    "asset/Decoder.safetensors",
    "asset/DVAE.safetensors",
    "asset/Embed.safetensors",
    "asset/Vocos.safetensors",
    "asset/gpt/config.json",
    "asset/gpt/model.safetensors",
    "asset/tokenizer/special_tokens_map.json",
    "asset/tokenizer/tokenizer_config.json",
    "asset/tokenizer/tokenizer.json",
)


@dataclass(frozen=True)
class Checkpoint:
    """A located checkpoint: its root, and what its manifest (if any) overrides."""

    root: Path
    description: str = "ChatTTS published weights"
    sha256: dict[str, str] | None = None  # None: ChatTTS's published checksums
    config: dict[str, Any] = field(default_factory=dict)
    max_new_token: int | None = None  # a custom checkpoint's own audio-token budget per segment


def published_checksums() -> dict[str, str]:
    """ChatTTS's published checksums (`data/sha256_map.json`, a copy of ChatTTS 0.2.5's)."""
    text = (resources.files("workers.engines.chattts") / "data" / "sha256_map.json").read_text()
    return {str(k): str(v) for k, v in json.loads(text).items()}


def checksum_key(relative: str) -> str:
    """A file's key in ChatTTS's sha256_map.json: sha256_asset_gpt_config_json and so on."""
    *dirs, name = relative.split("/")
    return "sha256_" + "".join(f"{d}_" for d in dirs) + name.replace(".", "_")


def resolve_root(model_dir: str | None) -> Path:
    """The directory holding `asset/`, from CHATTTS_MODEL_DIR; EngineError if there is none."""
    if not model_dir:
        raise EngineError(
            "CHATTTS_MODEL_DIR is not set: point it at a directory holding ChatTTS's asset/ "
            "tree or at a Hugging Face cache holding 2Noise/ChatTTS (`chattts-online models "
            "pull` fetches the weights into it)"
        )
    base = Path(model_dir).expanduser()
    if not base.is_dir():
        raise EngineError(
            f"CHATTTS_MODEL_DIR {base} is not a directory (`chattts-online models pull` creates it)"
        )
    if (base / "asset").is_dir():
        return base
    for repo in (base, base / HF_REPO_DIR, base / "hub" / HF_REPO_DIR):
        if repo.name == HF_REPO_DIR and (repo / "snapshots").is_dir():
            return _snapshot(repo)
    raise EngineError(
        f"no ChatTTS checkpoint in {base}: expected {base / 'asset'} or a Hugging Face cache "
        f"holding {HF_REPO_DIR}; fetch one with `CHATTTS_MODEL_DIR={base} chattts-online models "
        "pull`"
    )


def _snapshot(repo: Path) -> Path:
    """The snapshot that refs/main names, else the most recently modified one."""
    ref = repo / "refs" / "main"
    if ref.is_file():
        named = repo / "snapshots" / ref.read_text().strip()
        if (named / "asset").is_dir():
            return named
    snapshots = [s for s in (repo / "snapshots").iterdir() if (s / "asset").is_dir()]
    if not snapshots:
        raise EngineError(f"the Hugging Face cache {repo} holds no snapshot with an asset/ tree")
    return max(snapshots, key=lambda s: s.stat().st_mtime)


def locate(model_dir: str | None) -> Checkpoint:
    """Find the checkpoint and check that every file is there (EngineError names a missing one)."""
    root = resolve_root(model_dir)
    for relative in ASSET_FILES:
        if not (root / relative).is_file():
            raise EngineError(
                f"ChatTTS checkpoint file missing: {root / relative} (`chattts-online models "
                "pull` fetches what is missing, `models verify` checks the rest)"
            )
    manifest = root / MANIFEST
    if not manifest.is_file():
        return Checkpoint(root)
    try:
        doc = json.loads(manifest.read_text("utf-8"))
        sha256 = {str(k): str(v) for k, v in doc["sha256"].items()}
        config = dict(doc.get("config") or {})
        budget = doc.get("max_new_token")
        max_new_token = int(budget) if budget is not None else None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise EngineError(f"ChatTTS checkpoint manifest {manifest} is invalid: {exc}") from exc
    description = str(doc.get("description") or "custom checkpoint")
    return Checkpoint(root, description, sha256, config, max_new_token)


def find_weights(model_dir: str | None) -> str | None:
    """None when CHATTTS_MODEL_DIR holds a complete checkpoint, else the reason it does not."""
    try:
        locate(model_dir)
    except EngineError as exc:
        return str(exc)
    return None


def sha256_file(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def verify(checkpoint: Checkpoint, expected: dict[str, str]) -> None:
    """Hash every file; EngineError names the first whose checksum differs."""
    for relative in ASSET_FILES:
        path = checkpoint.root / relative
        if not path.is_file():
            raise EngineError(f"ChatTTS checkpoint file missing: {path}")
        want = expected.get(checksum_key(relative))
        if want is None:
            raise EngineError(f"no checksum known for {path}")
        if sha256_file(path) != want:
            raise EngineError(
                f"ChatTTS checkpoint file corrupt (sha256 mismatch): {path}; expected {want}"
            )


def apply_config(config: Any, overrides: dict[str, Any]) -> None:
    """Replace sections of ChatTTS's `config` with new dataclass objects built from `overrides`.

    ChatTTS's config defaults are shared class-level instances: assigning new objects (never
    mutating the old ones) keeps other configs and later loads unaffected.
    """
    from workers.engines.chattts.loading import imports

    imports.partial()
    from ChatTTS.config import config as cc

    def decoder(d: dict[str, Any]) -> Any:
        return cc.Decoder(**d)

    builders: dict[str, Any] = {
        "gpt": lambda d: cc.GPT(**d),
        "embed": lambda d: cc.Embed(**d),
        "decoder": decoder,
        "dvae": lambda d: cc.DVAE(
            encoder=decoder(d["encoder"]),
            decoder=decoder(d["decoder"]),
            vq=cc.VQ(**{**d["vq"], "levels": tuple(d["vq"]["levels"])}),
        ),
        "vocos": lambda d: cc.Vocos(
            feature_extractor=cc.FeatureExtractor(
                init_args=cc.FeatureExtractorInitArgs(**d.get("feature_extractor", {}))
            ),
            backbone=cc.Backbone(init_args=cc.BackboneInitArgs(**d["backbone"])),
            head=cc.FourierHead(init_args=cc.FourierHeadInitArgs(**d["head"])),
        ),
        "spk_stat": str,
    }
    for section, values in overrides.items():
        if section not in builders:
            raise EngineError(f"unknown ChatTTS config section in the manifest: {section!r}")
        try:
            setattr(config, section, builders[section](values))
        except (TypeError, KeyError) as exc:
            raise EngineError(f"invalid ChatTTS config section {section!r}: {exc}") from exc


def resolve_device(spec: str) -> Any:
    """A torch.device from `auto`, `cpu`, `cuda` or `cuda:N`; EngineError when unavailable."""
    import torch

    spec = (spec or "auto").strip().lower()
    if spec == "auto":
        return torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    if spec == "cpu":
        return torch.device("cpu")
    if spec == "cuda" or spec.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise EngineError(f"device {spec!r} requested but CUDA is not available")
        index = 0 if spec == "cuda" else _device_index(spec)
        if index >= torch.cuda.device_count():
            raise EngineError(
                f"device {spec!r} requested but only {torch.cuda.device_count()} GPU(s) exist"
            )
        return torch.device("cuda", index)
    raise EngineError(f"unsupported device {spec!r}: use auto, cpu, cuda or cuda:N")


def _device_index(spec: str) -> int:
    try:
        return int(spec.split(":", 1)[1])
    except ValueError:
        raise EngineError(f"invalid device {spec!r}: use cuda:N") from None


def load_model(checkpoint: Checkpoint, device: Any, logger: logging.Logger) -> Any:
    """The runtime's modules (`assembly.Model`) from the checkpoint: verified (once: a stamp
    remembers it), then built around the files' own tensors. ChatTTS's loader is not used: it
    hashes every file on every start and copies weights it first initialised at random."""
    from workers.engines.chattts.loading import assembly, imports

    imports.partial()
    from ChatTTS.config import Config

    config = Config()
    if checkpoint.config:
        apply_config(config, checkpoint.config)
    expected = published_checksums()
    if checkpoint.sha256 is not None:
        log.warning(
            "ChatTTS checkpoint %s carries its own manifest (%s): verified against its checksums, "
            "not the published ones",
            checkpoint.root,
            checkpoint.description,
        )
        expected = dict(checkpoint.sha256)
    if not stamp.is_fresh(checkpoint.root, ASSET_FILES, expected):
        verify(checkpoint, expected)
        stamp.write(checkpoint.root, ASSET_FILES, expected)
    try:
        return assembly.build(config, checkpoint.root, device, logger)
    except EngineError:
        raise
    except Exception as exc:
        raise EngineError(f"loading ChatTTS from {checkpoint.root} failed: {exc}") from exc


def load_chat(checkpoint: Checkpoint, device: Any, compile: bool = False) -> Any:
    """A whole ChatTTS Chat (our BatchChat) loaded from the checkpoint, for the library's paths,
    tests and benchmarks."""
    from workers.engines.chattts.library.infer import library_logger
    from workers.engines.chattts.loading import assembly

    logger = library_logger()
    return assembly.chat_around(load_model(checkpoint, device, logger), compile, logger)
