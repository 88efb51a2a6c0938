"""Streams on the ChatTTS runtime alone, on any device (a GPU machine without the web tier or
Redis: bench/gpu_check.sh): the capacity the runtime measures after a full batch, then N streamed
rows at once (N from 1 to twice the capacity), each played by a 1x listener from its first chunk,
with admission by capacity and without. Prints the gap-free streams and underruns per N.

    PYTHONPATH=. python bench/stream_capacity.py [--device cuda] [--size full] [--tokens 256]
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.lib import cli
from bench.lib.playback import underrun
from bench.lib.report import write_json

GAP_FREE_S = 0.1
TEXT = "今天天气很好，我们去公园散步吧。"


def engine(model: Path, device: str, slots: int, headroom: float) -> Any:
    from core.infra.settings import Settings
    from workers.engines.chattts.engine import ChatTTSEngine

    settings = Settings.of(
        engine="chattts",
        device=device,
        model_dir=str(model),
        max_batch=slots,
        stream_admission="capacity" if headroom else "off",
        stream_headroom=headroom or 1.25,
    )
    built = ChatTTSEngine(settings)
    built.load()
    built.warmup()
    return built


def run_rows(chat: Any, n: int, streamed: bool, seed: int) -> list[float]:
    """N rows at once; the underrun of each (streamed) row's listener."""
    from core.queue.job import SynthesisRequest
    from workers.engines.base import PlaybackClock, Segment
    from workers.engines.chattts.runtime.scheduler import RowRequest

    scheduler = chat.runtime.scheduler
    arrivals: dict[int, list[tuple[float, float]]] = {i: [] for i in range(n)}
    errors: list[str] = []

    def done(key: Any, result: Any) -> None:
        if result.error:
            errors.append(result.error)

    for i in range(n):
        request = SynthesisRequest(text=TEXT, voice="zh_female", seed=seed + i, stream=streamed)
        segment = Segment(f"r{i}", 0, TEXT, request)
        prompt, sampling = chat.rows.row(segment, seed + i, chat.max_new_token)
        clock = PlaybackClock() if streamed else None

        def on_chunk(key: Any, audio: Any, final: bool, i: int = i, clock: Any = clock) -> None:
            arrivals[i].append((time.perf_counter(), audio.size / 24_000))
            if clock is not None:
                clock.sent(audio.size / 24_000)

        scheduler.submit(
            RowRequest(i, prompt, sampling, done, on_chunk if streamed else None, clock)
        )
    scheduler.run()
    if errors:
        raise RuntimeError(f"rows failed: {errors[:3]}")
    return [underrun(arrivals[i]) for i in range(n)]


def main() -> int:
    p = cli.parser("bench.stream_capacity", __doc__, output="", json_alias=True)
    p.add_argument("--device", default="cpu")
    p.add_argument("--size", default="tiny", choices=["tiny", "full"])
    p.add_argument("--tokens", type=int, default=256, help="audio tokens a stream (5.5 s)")
    p.add_argument("--slots", type=int, default=48)
    args = p.parse_args()
    from workers.engines.chattts.loading.checkpoint import MANIFEST, build_checkpoint

    model = Path(os.environ.get("TMPDIR", "/tmp")) / f"chattts-capacity-{args.size}-{args.tokens}"
    if not (model / MANIFEST).is_file():
        build_checkpoint(model, args.size, max_new_token=args.tokens, shape_eos=False)
    figures: dict[str, Any] = {"device": args.device, "size": args.size, "tokens": args.tokens}
    for mode, headroom in (("capacity", 1.25), ("off", 0.0)):
        chat = engine(model, args.device, args.slots, headroom)
        run_rows(chat, args.slots, streamed=False, seed=1)  # every slot measured once
        run_rows(chat, 4, streamed=True, seed=2)  # and the vocoder's chunks
        capacity = max(1, chat.runtime.scheduler.stream_capacity)
        figures.setdefault("capacity_streams", capacity)
        cap = figures["capacity_streams"]
        counts = sorted({1, max(1, cap // 2), cap, cap * 3 // 2, 2 * cap})
        figures[mode] = []
        for n in counts:
            stalls = run_rows(chat, n, streamed=True, seed=1000 * n)
            row = {
                "streams": n,
                "gap_free": sum(s < GAP_FREE_S for s in stalls),
                "underrun_total_s": round(sum(stalls), 3),
                "underrun_max_s": round(max(stalls), 3),
            }
            figures[mode].append(row)
            print(f"{mode:>8} capacity {cap:>3}: {json.dumps(row)}", flush=True)
    if args.output:
        write_json(args.output, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
