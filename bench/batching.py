"""Measurement 6 of the suite: ChatTTS batching, audio-seconds per second at batch 1 and batch 8,
by bench/chattts_bench.py (the full-size architecture with random weights; every row runs exactly
--tokens generation steps). Skipped, not failed, where ChatTTS or torch cannot be imported.

    python -m bench.batching [--quick] [--output PATH] [--device auto|cpu|cuda]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from . import harness
from .clients import BenchError
from .stack import REPO_ROOT
from .table import Row

SECTION = "6. ChatTTS batching"
SCRIPT = REPO_ROOT / "bench" / "chattts_bench.py"
TIMEOUT_S = 1200


def missing() -> str | None:
    """Why ChatTTS cannot run here, or None."""
    for module in ("torch", "ChatTTS"):
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return f"{module} is not installed (pip install '.[chattts]')"
    return None


def rows(result: dict[str, Any]) -> list[Row]:
    by_batch = {r["batch"]: r for r in result["batches"]}
    if 1 not in by_batch or 8 not in by_batch:
        raise BenchError(f"chattts_bench reported batches {sorted(by_batch)}, not 1 and 8")
    b1, b8 = by_batch[1]["audio_s_per_s"], by_batch[8]["audio_s_per_s"]
    if not (b1 > 0 and b8 > 0):
        raise BenchError(f"chattts_bench reported no audio: batch 1 {b1}, batch 8 {b8}")
    where = f"{result['device']}, {result['threads']} threads, {result['tokens_per_row']} tokens"
    return [
        Row(
            SECTION,
            f"audio-s/s at batch 8 (baseline column: batch 1), random weights, {where}",
            b8,
            "audio-s/s",
            b1,
        ),
        Row(
            SECTION,
            "real-time factor per row at batch 8 (baseline column: batch 1)",
            by_batch[8]["rtf"],
            "x",
            by_batch[1]["rtf"],
        ),
    ]


async def measure(args: argparse.Namespace) -> tuple[list[Row], dict[str, Any]]:
    tokens = args.tokens or (8 if args.quick else 0)  # 0: the script's default (48 CPU, 256 GPU)
    repeats = 1 if args.quick else 2
    with tempfile.TemporaryDirectory(prefix="chattts-batching-") as tmp:
        out = Path(tmp) / "chattts.json"
        command = [
            sys.executable,
            str(SCRIPT),
            "--batches",
            "1,8",
            "--repeats",
            str(repeats),
            "--device",
            args.device,
            "--no-cold-start",
            "--json",
            str(out),
        ]
        if tokens:
            command += ["--tokens", str(tokens)]
        print(f"batching: {' '.join(command[1:])}", flush=True)
        done = await asyncio.to_thread(
            subprocess.run, command, timeout=TIMEOUT_S, check=False, cwd=REPO_ROOT
        )
        if done.returncode != 0 or not out.exists():
            raise BenchError(f"chattts_bench.py exited {done.returncode}")
        result: dict[str, Any] = json.loads(out.read_text())
    return rows(result), result


def main(argv: list[str] | None = None) -> int:
    p = harness.parser("bench.batching", __doc__.split("\n\n")[0])
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (auto)")
    p.add_argument("--tokens", type=int, default=0, help="tokens per row (48 CPU, 256 GPU)")
    args = p.parse_args(argv)
    why = missing()
    if why is not None:
        out = Path(args.output) if args.output else harness.RESULTS_DIR / "batching.json"
        harness.write(out, [], {}, skipped=why)
        print(f"batching skipped: {why}")
        return 0
    return harness.main("batching", args, measure)


if __name__ == "__main__":
    sys.exit(main())
