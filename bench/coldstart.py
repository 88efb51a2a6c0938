"""Where a ChatTTS worker's cold start goes: process start to a loaded, warmed-up engine, by phase.

    python -m bench.coldstart [--repeats 3] [--device cpu] [--drop-caches]

A child process per run imports, loads and warms up the engine on the full-size checkpoint with
random weights (built once, bench/chattts_bench.py's), timing each phase by the wall clock:
interpreter start, `import torch`, `import ChatTTS` (transformers, vocos and the rest), the
engine's load, its warm-up. The load is profiled (cProfile) to split it into building modules,
random initialisation of parameters that the checkpoint then overwrites, reading the files,
moving to the device, the tokenizer and the rest; the profile's shares are scaled to the
load's wall time (the profiler slows Python, not the kernels it calls). Medians of the runs,
with their range. `--drop-caches` empties the page cache before each run (root only).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# The child: phase timestamps (wall clock, comparable with the parent's) and the load's profile.
CHILD = r"""
import time, json, sys, cProfile, pstats, logging
t = {"start": float(sys.argv[4])}
t["python"] = time.time()
import torch
t["torch"] = time.time()
import ChatTTS
t["chattts"] = time.time()
logging.disable(logging.WARNING)
sys.path.insert(0, sys.argv[1])
from workers.engines import create_engine
from workers.infra.settings import Settings
engine = create_engine(Settings(engine="chattts", model_dir=sys.argv[2], device=sys.argv[3]))
t["ours"] = time.time()
profile = cProfile.Profile()
profile.enable()
engine.load()
profile.disable()
t["load"] = time.time()
engine.warmup()
t["warmup"] = time.time()
stats = pstats.Stats(profile)
rows = {}
for (path, line, name), (cc, nc, tt, ct, callers) in stats.stats.items():
    rows[f"{path}:{name}"] = [tt, ct, [f"{p}:{n}" for (p, _, n) in callers]]
print("REPORT " + json.dumps({"t": t, "profile": rows}), flush=True)
"""

# Profile rows (by file and function name) that make each share of the load, first match wins.
SHARES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("random init (then overwritten)", ("torch/nn/init.py:", ":reset_parameters")),
    ("reading the files", ("safetensors/", ":load_state_dict", ":_load_from_state_dict")),
    ("moving to the device", ("torch/nn/modules/module.py:_apply",)),
    ("tokenizer", ("tokenization_utils", "tokenizers/")),
    ("checksums", ("hashlib", ":sha256", "check_all_assets", "sha256_file")),
)


def measure(model_dir: Path, device: str, drop: bool) -> dict[str, float]:
    if drop:
        subprocess.run(["sync"], check=True)
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    started = time.time()
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(ROOT), str(model_dir), device, str(started)],
        capture_output=True,
        text=True,
        check=True,
    )
    line = next(x for x in child.stdout.splitlines() if x.startswith("REPORT "))
    report = json.loads(line[7:])
    t = report["t"]
    load = t["load"] - t["ours"]
    phases = {
        "interpreter start": t["python"] - t["start"],
        "import torch": t["torch"] - t["python"],
        "import ChatTTS (transformers, vocos, ...)": t["chattts"] - t["torch"],
        "import our engine": t["ours"] - t["chattts"],
    }
    phases.update(split_load(report["profile"], load))
    phases["warm-up"] = t["warmup"] - t["load"]
    phases["total: process start to ready"] = t["warmup"] - t["start"]
    return phases


def split_load(profile: dict[str, Any], load_s: float) -> dict[str, float]:
    """The load's wall time split by share: the cumulative time of the outermost calls of each
    share's functions (a call made from another of the same share is not counted twice),
    scaled from the profile's total to the wall time."""
    total = sum(tt for tt, _, _ in profile.values()) or 1.0

    def share(key: str) -> str | None:
        return next((name for name, needles in SHARES if any(n in key for n in needles)), None)

    spent: dict[str, float] = {name: 0.0 for name, _ in SHARES}
    for key, (_, ct, callers) in profile.items():
        name = share(key)
        if name is not None and not any(share(c) == name for c in callers):
            spent[name] += ct
    out = {f"load: {name}": load_s * seconds / total for name, seconds in spent.items()}
    out["load: building modules and the rest"] = load_s - sum(out.values())
    return out


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m bench.coldstart", description=__doc__)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--device", default="cpu")
    p.add_argument("--drop-caches", action="store_true", help="cold page cache (root)")
    p.add_argument(
        "--model-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "chattts-full-random",
        help="the full-size random checkpoint (built there when missing)",
    )
    args = p.parse_args()
    sys.path.insert(0, str(ROOT))
    from bench.chattts_bench import ensure_checkpoint

    model_dir = ensure_checkpoint(args.model_dir)
    size = sum(f.stat().st_size for f in (model_dir / "asset").rglob("*") if f.is_file())
    runs = [measure(model_dir, args.device, args.drop_caches) for _ in range(args.repeats)]
    cache = "cold" if args.drop_caches else "warm"
    print(f"cold start, {size / 1e9:.2f} GB checkpoint, {args.device}, page cache {cache}:")
    summary: dict[str, Any] = {}
    for phase in runs[0]:
        values = [r[phase] for r in runs]
        median = statistics.median(values)
        summary[phase] = {"median": median, "min": min(values), "max": max(values)}
        print(f"  {phase:45} {median:6.2f} s  ({min(values):.2f} to {max(values):.2f})")
    out = ROOT / "bench" / "results" / f"coldstart-{args.device}-{cache}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"checkpoint_gb": size / 1e9, "phases": summary}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
