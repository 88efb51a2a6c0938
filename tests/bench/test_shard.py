"""bench.shard measures what a job costs Redis from Redis's own counters, on a real stack."""

from __future__ import annotations

import argparse

import pytest

from bench import shard


def test_a_job_costs_commands_bytes_cpu_and_memory() -> None:
    args = argparse.Namespace(jobs=12, concurrency=4, workers=1, keep_logs=False)
    figures = shard.measure(args)
    # A job is a handful of scripts and reads, its WAV in and out once, and its record kept.
    assert 10 < figures["commands_per_job"] < 500, figures
    wav_bytes = figures["audio_s_per_job"] * 24_000 * 2
    assert wav_bytes < figures["bytes_in_per_job"] < 3 * wav_bytes, figures
    assert wav_bytes < figures["bytes_out_per_job"] < 3 * wav_bytes, figures
    assert wav_bytes < figures["memory_kept_per_job"] < 3 * wav_bytes, figures
    assert figures["redis_cpu_ms_per_job"] > 0 and figures["jobs_per_s_per_core"] > 0


@pytest.mark.parametrize("store", ["file", "s3"])
def test_with_an_audio_store_redis_keeps_references_not_audio(store: str) -> None:
    args = argparse.Namespace(jobs=12, concurrency=4, workers=1, keep_logs=False)
    figures = shard.measure(args, store)
    assert figures["store_writes_per_s"] > 0 and figures["store_reads_per_s"] > 0
    wav_bytes = figures["audio_s_per_job"] * 24_000 * 2
    assert figures["memory_kept_per_job"] < wav_bytes / 4, figures
    assert figures["bytes_in_per_job"] < wav_bytes, figures
