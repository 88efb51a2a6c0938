"""The start-up path: modules built around the checkpoint's mapped tensors, ChatTTS imported in
part, its Chat and the recording encoder on first use, the normalizer's machine code cached."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from tests.workers.engines.chattts.conftest import requires_chattts

pytestmark = [pytest.mark.chattts, requires_chattts]
ROOT = Path(__file__).resolve().parents[4]


def _tensors(module: Any) -> dict[str, Any]:
    return {**dict(module.named_parameters()), **dict(module.named_buffers())}


def test_every_tensor_is_the_one_chattts_own_loader_gives(tiny_checkpoint: Path) -> None:
    import torch

    from workers.engines.chattts.library.chat import BatchChat
    from workers.engines.chattts.loading import loader

    checkpoint = loader.locate(str(tiny_checkpoint))
    ours = loader.load_chat(checkpoint, torch.device("cpu"))
    assert "dvae" not in vars(ours)  # the recording encoder waits for its first use
    theirs = BatchChat()
    loader.apply_config(theirs.config, checkpoint.config)
    paths = {k: str(checkpoint.root / v) for k, v in asdict(theirs.config.path).items()}
    assert theirs._load(device=torch.device("cpu"), **paths)
    for name in ("vocos", "decoder", "embed", "dvae"):
        mine, reference = _tensors(getattr(ours, name)), _tensors(getattr(theirs, name))
        assert mine.keys() == reference.keys(), name
        for key, tensor in mine.items():
            assert tensor.dtype == reference[key].dtype, (name, key)
            assert torch.equal(tensor, reference[key]), (name, key)
    mine, reference = _tensors(ours.gpt.gpt), _tensors(theirs.gpt.gpt)
    assert mine.keys() == reference.keys()
    for key, tensor in mine.items():
        assert tensor.dtype == reference[key].dtype, key
        torch.testing.assert_close(tensor, reference[key], rtol=0, atol=0)
    assert ours.gpt.gpt.config._attn_implementation == theirs.gpt.gpt.config._attn_implementation


def _mapping_of(address: int) -> str:
    for line in Path("/proc/self/maps").read_text().splitlines():
        span, *rest = line.split(maxsplit=5)
        low, high = (int(x, 16) for x in span.split("-"))
        if low <= address < high:
            return rest[-1] if len(rest) == 5 else ""
    return ""


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads Linux's /proc")
def test_weights_are_pages_of_the_files_shared_by_the_model_and_the_chat(
    tiny_checkpoint: Path,
) -> None:
    import torch

    from workers.engines.chattts.library import infer as library
    from workers.engines.chattts.loading import loader

    model = loader.load_model(
        loader.locate(str(tiny_checkpoint)), torch.device("cpu"), library.library_logger()
    )
    q = model.transformer.layers[0].q
    assert _mapping_of(q.data_ptr()).endswith("asset/gpt/model.safetensors")
    emb = next(iter(model.embed.parameters()))
    assert _mapping_of(emb.data_ptr()).endswith("asset/Embed.safetensors")
    from workers.engines.chattts.loading import assembly

    chat = assembly.chat_around(model, False, library.library_logger())
    layer = chat.gpt.gpt.layers[0].self_attn.q_proj.weight
    assert layer.data_ptr() == q.data_ptr()  # one copy for both paths


def test_the_kv_cache_is_zero_and_resident_only_where_written() -> None:
    import torch

    from workers.engines.chattts.runtime.decoder import zeros

    def anon_kb() -> int:  # anonymous and shared-memory pages: wherever the cache could live
        status = Path("/proc/self/status").read_text().splitlines()
        kinds = ("RssAnon:", "RssShmem:")
        return sum(int(x.split()[1]) for x in status if x.startswith(kinds))

    before = anon_kb()
    cache = zeros((64, 1024, 1024), torch.float32, torch.device("cpu"))  # 256 MiB
    assert anon_kb() - before < 16 * 1024
    cache[3, :8] = 1.0
    assert float(cache[3].sum()) == 8 * 1024
    assert float(cache[:3].abs().sum()) == 0.0 and float(cache[4:].abs().sum()) == 0.0
    assert anon_kb() - before < 16 * 1024


# A worker's start: the engine, loaded and warmed up; then a recording, then a refined segment.
START = r"""
import json, sys, logging
logging.disable(logging.WARNING)
from workers.engines import create_engine
from workers.engines.base import synthesize
from core.infra.settings import Settings
from workers.engines.base import Segment
from core.queue.job import SynthesisRequest
engine = create_engine(Settings.of(engine="chattts", model_dir=sys.argv[1], device="cpu"))
engine.load()
engine.warmup()
def state():
    # ChatTTS's package __init__ (which defines Chat) has not run while the import is partial.
    return {"partial": "Chat" not in vars(sys.modules["ChatTTS"]), "chat": engine._chat is not None,
            "modelling": "transformers.modeling_utils" in sys.modules,
            "compiler": "torch._dynamo" in sys.modules, "einx": "einx" in sys.modules}
out = {"ready": state()}
import numpy as np
tone = 0.3 * np.sin(np.arange(24000, dtype=np.float32) * 2 * np.pi * 220 / 24000)
engine.voice_from_recording(tone.astype(np.float32), 24000, "你好")
out["recording"] = state()
engine.max_new_token = 8
request = SynthesisRequest(text="你好", voice="zh_female", seed=1, refine=True)
synthesize(engine, [Segment("j", 0, request.text, request)])
out["refined"] = state()
print("OUT " + json.dumps(out))
"""


def _child(script: str, *args: str, **env: str) -> dict[str, Any]:
    """Run `script` in a fresh interpreter; the JSON it prints after "OUT "."""
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        timeout=600,
        check=True,
    )
    line = next(x for x in done.stdout.splitlines() if x.startswith("OUT "))
    result: dict[str, Any] = json.loads(line[4:])
    return result


def test_a_worker_starts_on_part_of_chattts_and_loads_the_rest_when_first_needed(
    tiny_checkpoint: Path,
) -> None:
    state = _child(START, str(tiny_checkpoint))
    assert state["ready"] == {
        "partial": True,
        "chat": False,
        "modelling": False,
        "compiler": False,
        "einx": False,
    }
    # A recording needs the encoder and its quantizer, not ChatTTS's Chat.
    assert state["recording"]["einx"] and not state["recording"]["chat"]
    assert state["recording"]["partial"] and not state["recording"]["modelling"]
    assert state["refined"]["chat"] and not state["refined"]["partial"]
    assert state["refined"]["modelling"]


NORMALIZE = r"""
import json, logging
from workers.engines.chattts.loading import imports
from workers.engines.chattts.library import infer as library
imports.partial()
library.cache_compiled_normalizer()
import ChatTTS.norm as norm
from importlib import resources
normalizer = norm.Normalizer(str(resources.files("ChatTTS") / "res" / "homophones_map.json"),
                             logging.getLogger("t"))
text = normalizer("你好，欢迎使用。", True, True, None)
stats = norm._fast_replace.stats
print("OUT " + json.dumps({"hits": sum(stats.cache_hits.values()),
                             "misses": sum(stats.cache_misses.values()), "text": text}))
"""


def test_the_normalizers_machine_code_is_compiled_once(tmp_path: Path) -> None:
    first = _child(NORMALIZE, NUMBA_CACHE_DIR=str(tmp_path))
    second = _child(NORMALIZE, NUMBA_CACHE_DIR=str(tmp_path))
    assert first["misses"] >= 1 and first["hits"] == 0
    assert second["hits"] >= 1 and second["misses"] == 0
    assert first["text"] == second["text"] == "你好，欢迎使用。"
