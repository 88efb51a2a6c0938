"""ChatTTS engine benchmark: the full-size architecture with random weights, on CPU or CUDA.

For each decode path, ChatTTS's own loop (`library`) and our runtime (`ours`), in one run: steps/s
and audio-seconds/s at batch 1, 2, 4, 8, time to first audio (first chunk; the library path
delivers a row whole), real-time factor, peak GPU memory (CUDA); then ours / library per batch.
Also the cold start (process start to a loaded, warmed-up engine) with the ~1 GB checkpoint.
Random weights never end a row, so every row runs exactly --tokens steps: the figures measure
the engine, not the text.

    python bench/chattts_bench.py [--device auto|cpu|cuda] [--tokens 48] [--runtimes library,ours]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TOKENS_PER_SECOND = 46.875  # ChatTTS audio tokens per second of speech (24 kHz / 512 samples)
TEXTS = (
    "今天天气很好，我们去公园散步吧。",
    "欢迎使用语音合成服务，祝你生活愉快。",
    "The quick brown fox jumps over the lazy dog.",
    "Batching many requests keeps the GPU busy.",
    "我们的服务支持中文和英文。",
    "Every segment is streamed as soon as it is ready.",
    "这是一个随机权重的模型，声音没有意义。",
    "Numbers like 42 are spelled out first.",
)
# The child process of the cold-start measurement: import, load, warm up, report.
COLD_START = """
import json, logging, sys
logging.disable(logging.WARNING)
sys.path.insert(0, sys.argv[1])
from workers.engines import create_engine
from core.infra.settings import Settings
engine = create_engine(Settings.of(engine="chattts", model_dir=sys.argv[2], device=sys.argv[3]))
engine.load()
engine.warmup()
print("READY", json.dumps({"load_s": engine.load_seconds}), flush=True)
"""


def main() -> None:
    args = parse_args()
    quiet()
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from bench.lib.checkpoints import random_checkpoint

    model_dir = random_checkpoint("full", root=Path(args.model_dir))
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    tokens = args.tokens or (256 if device.startswith("cuda") else 48)
    results: dict[str, Any] = {
        "device": device,
        "tokens_per_row": tokens,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }
    print(
        f"device {device}, torch {torch.__version__}, {torch.get_num_threads()} CPU threads, "
        f"{tokens} tokens per row ({tokens / TOKENS_PER_SECOND:.2f} s of audio), "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    if device.startswith("cuda"):
        print(f"GPU: {torch.cuda.get_device_name(torch.device(device))}")

    if not args.no_cold_start:
        results["cold_start"] = cold_start(model_dir, device)
        cold = results["cold_start"]
        print(
            f"cold start (process start to ready, checkpoint {cold['checkpoint_gb']:.2f} GB): "
            f"{cold['ready_s']:.1f} s, of which loading {cold['load_s']:.1f} s"
        )

    results["runtimes"] = {}
    for runtime in args.runtimes:
        results["runtimes"][runtime] = run_batches(
            model_dir, device, tokens, args.batches, args.repeats, runtime
        )
    print_table(results)
    if args.output:
        from bench.lib.report import write_json

        write_json(args.output, results)


def quiet() -> None:
    """Every row is cut at --tokens on purpose: the engine's truncation warnings are expected."""
    for name in (
        "ChatTTS",
        "workers.engines.chattts.engine",
        "workers.engines.chattts.loading.loader",
    ):
        logging.getLogger(name).setLevel(logging.ERROR)


def parse_args() -> argparse.Namespace:
    from bench.lib import cli

    parser = cli.parser("bench.chattts_bench", __doc__.splitlines()[0], output="", json_alias=True,
                        repeats=2)  # fmt: skip
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    parser.add_argument(
        "--tokens",
        type=int,
        default=0,
        help="audio tokens per row (default 48 on CPU, 256 on CUDA)",
    )
    parser.add_argument(
        "--batches", default="1,2,4,8", type=lambda s: [int(b) for b in s.split(",")]
    )
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: default)")
    parser.add_argument(
        "--model-dir",
        default=str(Path(tempfile.gettempdir()) / "chattts-online-bench-full"),
        help="full-size random checkpoint (built there when absent)",
    )
    parser.add_argument(
        "--runtimes",
        default="library,ours",
        type=lambda s: s.split(","),
        help="decode paths to measure: library (ChatTTS's infer), ours (the runtime)",
    )
    parser.add_argument(
        "--no-cold-start", action="store_true", help="skip the cold-start measurement"
    )
    return parser.parse_args()


def cold_start(model_dir: Path, device: str) -> dict[str, float]:
    size = sum(f.stat().st_size for f in (model_dir / "asset").rglob("*") if f.is_file())
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-c", COLD_START, str(ROOT), str(model_dir), device],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    report: dict[str, float] = {}
    for line in child.stdout:
        if line.startswith("READY"):
            report = json.loads(line.split(" ", 1)[1])
            break
    ready = time.perf_counter() - started
    child.stdout.close()
    child.wait()
    if not report:
        raise SystemExit("the cold-start child failed before it was ready")
    return {"ready_s": ready, "load_s": report["load_s"], "checkpoint_gb": size / 1e9}


class FirstAudio:
    """When the first audio of a call came out."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.firsts: list[float] = []

    def chunk(self, _segment: Any, _audio: Any, _final: bool) -> None:
        self.firsts.append(time.perf_counter() - self.started)


def run_batches(
    model_dir: Path, device: str, tokens: int, batches: list[int], repeats: int, runtime: str
) -> list[dict[str, Any]]:
    import gc

    import torch

    from core.infra.settings import Settings
    from core.infra.worker_sections import RuntimeName
    from core.queue.job import SynthesisRequest
    from workers.engines.base import Segment, run_segments
    from workers.engines.chattts import create

    settings = Settings.of(
        model_dir=str(model_dir),
        device=device,
        max_batch=max(batches),
        runtime=cast(RuntimeName, runtime),
        context=tokens + 256,  # no room wasted: the rows' prompts are short
    )
    engine: Any = create(settings)
    engine.load()
    engine.warmup()
    model = getattr(engine, "engine", engine)  # the library's, behind the batch adapter
    model.max_new_token = tokens  # random weights never end a row: every row is cut there
    cuda = model.device.type == "cuda"
    rows = []
    for batch in batches:
        segments = [
            Segment(
                f"job{i}",
                0,
                TEXTS[i % len(TEXTS)],
                SynthesisRequest(text=TEXTS[i % len(TEXTS)], seed=i),
            )
            for i in range(batch)
        ]
        segments = [
            Segment(s.job_id, 0, engine.pieces(s.text, s.request)[0][0], s.request)
            for s in segments
        ]
        best = first_best = float("inf")
        peak = None
        for _ in range(repeats):
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            clock = FirstAudio()
            results = run_segments(engine, segments, clock.chunk)
            started, firsts = clock.started, clock.firsts
            if cuda:
                torch.cuda.synchronize()
                peak = torch.cuda.max_memory_allocated() / 2**20
            best = min(best, time.perf_counter() - started)
            first_best = min(first_best, firsts[0] if firsts else best)
        # The vocoder yields (2n - 1) hops of 256 samples for n tokens.
        lengths = [round((r.audio.size / 256 + 1) / 2) for r in results]
        produced, steps = sum(lengths), max(lengths)
        audio_s = produced / TOKENS_PER_SECOND
        rows.append(
            {
                "batch": batch,
                "wall_s": best,
                "steps_per_s": steps / best,
                "tokens_per_s": produced / best,
                "audio_s_per_s": audio_s / best,
                "first_audio_s": first_best,
                "rtf": best / (audio_s / batch),
                "peak_gpu_mib": peak,
                "kv_cache_mib_per_slot": (
                    model.runtime.decoder.bytes_per_slot() / 2**20 if model.runtime else None
                ),
            }
        )
        print(f"{runtime} batch {batch}: {best:.2f} s", flush=True)
    del engine
    gc.collect()
    return rows


def print_table(results: dict[str, Any]) -> None:
    """Each runtime's rows, its KV cache, and ours over the library's; the ratios kept in
    `results`."""
    print()
    print(
        f"{'path':>8} {'batch':>5} {'wall s':>8} {'steps/s':>8} {'tokens/s':>9} "
        f"{'audio s/s':>10} {'RTF':>7} {'first audio s':>13} {'peak GPU MiB':>12}"
    )
    for runtime, rows in results["runtimes"].items():
        for r in rows:
            peak = f"{r['peak_gpu_mib']:.0f}" if r["peak_gpu_mib"] is not None else "-"
            print(
                f"{runtime:>8} {r['batch']:>5} {r['wall_s']:>8.2f} {r['steps_per_s']:>8.1f} "
                f"{r['tokens_per_s']:>9.1f} {r['audio_s_per_s']:>10.2f} {r['rtf']:>7.3f} "
                f"{r['first_audio_s']:>13.2f} {peak:>12}"
            )
    paths = results["runtimes"]
    if paths.get("ours"):
        per_slot = paths["ours"][0]["kv_cache_mib_per_slot"]
        positions = results["tokens_per_row"] + 256
        print(f"\nour runtime's KV cache: {per_slot:.0f} MiB per slot ({positions} positions)")
    if "ours" in paths and "library" in paths:
        print()
        ratios = {}
        for ours, lib in zip(paths["ours"], paths["library"], strict=True):
            ratio = ours["steps_per_s"] / lib["steps_per_s"]
            first = lib["first_audio_s"] / ours["first_audio_s"]
            ratios[ours["batch"]] = {"steps": ratio, "first_audio": first}
            print(
                f"batch {ours['batch']}: ours / library steps/s {ratio:.2f}x, "
                f"time to first audio {first:.1f}x shorter"
            )
        results["ours_over_library"] = ratios


if __name__ == "__main__":
    main()
