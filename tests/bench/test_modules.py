"""The measurement modules' own logic: rows from their figures, the keyspace observer's output."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from bench import batching, notice
from bench.lib import baseline_env, tracehook
from bench.lib.keyspace import KeyspaceLog
from bench.lib.stats import BenchError
from tests.bench.helpers import ROOT


def _batch(batch: int, audio_s_per_s: float, first_s: float = 1.0) -> dict[str, Any]:
    return {
        "batch": batch,
        "audio_s_per_s": audio_s_per_s,
        "steps_per_s": audio_s_per_s * 46.875 / batch,
        "first_audio_s": first_s,
    }


def test_batching_rows_put_our_runtime_against_chatttss_loop() -> None:
    result = {"device": "cpu", "threads": 2, "tokens_per_row": 48}
    ours = [_batch(1, 0.5, 0.5), _batch(8, 2.0, 0.6)]
    library = [_batch(1, 0.25, 4.0), _batch(8, 1.0, 8.0)]
    rows = batching.rows({**result, "runtimes": {"ours": ours, "library": library}})
    assert rows[0].ours / rows[0].baseline == 2.0 and rows[0].met  # steps/s >= 1.5x
    assert rows[1].ours == 2.0 and rows[1].baseline == 1.0
    assert rows[2].ours == 0.6 and rows[2].baseline == 8.0 and rows[2].met  # <= 1/10
    slow_start = [_batch(1, 0.5), _batch(8, 2.0, 2.0)]
    rows = batching.rows({**result, "runtimes": {"ours": slow_start, "library": library}})
    assert rows[2].met is False
    with pytest.raises(BenchError, match="not 1 and 8"):
        batching.rows({**result, "runtimes": {"ours": ours[:1], "library": library}})
    with pytest.raises(BenchError, match="no audio"):
        batching.rows(
            {**result, "runtimes": {"ours": [_batch(1, 0.5), _batch(8, 0.0)], "library": library}}
        )
    with pytest.raises(BenchError, match="not ours and library"):
        batching.rows({**result, "runtimes": {"ours": ours}})


def _summary(notice_ms: float, overhead_ms: float) -> dict[str, Any]:
    figures = {"p50": notice_ms / 2, "p99": notice_ms}
    return {
        "notice_ms": figures,
        "overhead_ms": {"p50": overhead_ms, "p99": overhead_ms * 2},
        "worker_ms": {"p50": 10.0},
    }


def test_notice_rows_judge_the_targets() -> None:
    raw = {"ours_sse": _summary(9.0, 4.9), "baseline_100ms": _summary(100, 50)}
    rows = notice.rows(raw)
    verdicts = {r.metric: r.met for r in rows if r.target}
    assert list(verdicts.values()) == [True, True, True]
    assert rows[0].baseline == 50 and rows[2].baseline is None  # no 500 ms run
    late = notice.rows({"ours_sse": _summary(10.0, 5.0)})
    assert [r.met for r in late if r.target] == [False, False, False]


def test_timed_notice_and_overhead() -> None:
    t = notice.Timed("j", sent=100.0, known=100.050, worker_s=0.030, stored=100.045)
    assert t.notice_s == pytest.approx(0.005) and t.overhead_s == pytest.approx(0.020)


async def test_keyspace_log_reads_lines_as_they_are_written(tmp_path: Path) -> None:
    path = tmp_path / "keyspace.log"
    log = KeyspaceLog(path)
    log.poll()  # no file yet: nothing
    path.write_text("READY SCHED_FIFO\n10.5 set 0 tts:{main}:audio:a\n11.0 rpop 1 tts:q")
    await log.wait_ready(1)
    assert log.priority == "SCHED_FIFO"
    assert await log.stored_at("0", "tts:{main}:audio:a", 1) == 10.5
    assert log.pops == []  # the rpop line is not complete yet
    with path.open("a") as f:
        f.write("ueue\n11.2 set 1 tts:result:b\n12.0 set 1 tts:result:b\n")
    assert await log.stored_at("1", "tts:result:b", 1) == 11.2  # the first set counts
    assert log.popped_before(11.2, after=10.0) == 11.0
    with pytest.raises(BenchError, match="no BRPOP"):
        log.popped_before(11.2, after=11.1)
    with pytest.raises(BenchError, match="no keyspace notification"):
        await log.stored_at("0", "tts:{main}:audio:never", 0.05)


def test_the_baseline_ships_with_the_repository() -> None:
    """Any clone can reproduce the figures: the baseline design is bench/baseline/ unless
    CHATTTS_BASELINE_DIR names another copy."""
    shipped = Path(baseline_env.__file__).resolve().parents[1] / "baseline"
    assert baseline_env.located(str(shipped)) == shipped
    expected = os.environ.get(baseline_env.DIR_ENV) or shipped
    assert Path(expected) == baseline_env.DEFAULT_DIR
    assert baseline_env.located() is not None


GROWER = """import os, signal, sys
kept = []
os.kill(os.getpid(), signal.SIGUSR2)
os.kill(os.getpid(), signal.SIGUSR1)
for n in range(20000):
    kept.append(bytearray(100))
os.kill(os.getpid(), signal.SIGUSR1)
print(sys.argv[1:], __name__)
"""


def test_tracehook_runs_a_module_and_names_the_line_that_grew(tmp_path: Path) -> None:
    """The soak's --tracemalloc: the module runs as `python -m` would run it, a reading on
    SIGUSR2, a snapshot on SIGUSR1 (written by a forked copy), and the growth between the
    snapshots is found by its line."""
    (tmp_path / "grower.py").write_text(GROWER)
    folder = tmp_path / "traced"
    env = {
        **os.environ,
        "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}",
        tracehook.DIR_ENV: str(folder),
    }
    done = subprocess.run(
        [sys.executable, "-m", "bench.lib.tracehook", "grower", "--flag"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['--flag'] __main__"
    deadline = time.monotonic() + 30  # the forked copies write the snapshots
    while len(tracehook.snapshots(folder)) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    lines = tracehook.readings(folder)
    assert [line.get("snapshot") for line in lines] == [
        None,
        "snapshot-1.pickle",
        "snapshot-2.pickle",
    ]
    assert lines[2]["traced_mb"] - lines[1]["traced_mb"] > 2.0  # 20,000 blocks of 100+ bytes
    assert lines[2]["rss_mb"] > 0 and lines[2].get("malloc_in_use_mb", 1) > 0
    top = tracehook.growth(folder)[0]
    assert top["site"].endswith("grower.py:6") and top["code"] == "kept.append(bytearray(100))"
    assert top["blocks_grew"] >= 20000 and top["path"][-1] == top["site"]


def test_the_voice_path_is_cut_at_the_enqueue_and_the_engine_and_counted() -> None:
    from bench import voice_path

    web = [
        "web.job_service:submit",
        "web.intake.door:admit",
        "core.queue.voice_names:canonical",
        "web.intake.door:queue",
        "core.queue.scripts:Script.order",
        "core.queue.job:Job.public",  # the answer's branch: not on the way to the engine
    ]
    worker = [
        "workers.engines.batching:Batched.pieces",
        "workers.engines.espeak:EspeakEngine.pieces",
        "workers.hearing:Hearing.first",
        "workers.engines.espeak:_voice",
        "workers.continuous:Continuous._hear",  # after the engine: not counted
    ]
    path = voice_path.to_the_engine(web, worker)
    assert path == [*web[:5], *worker[:4]]
    figures = voice_path.summary(path)
    # job_service, door, voice_names, the door again, scripts, batching, espeak, hearing, espeak
    assert figures["stops"] == 9 and figures["modules"] == 7
    assert figures["returns"] == 2  # back in the door, back in the eSpeak NG engine
    assert voice_path.carries({"voice": voice_path.VOICE}) and not voice_path.carries("zh_female")
