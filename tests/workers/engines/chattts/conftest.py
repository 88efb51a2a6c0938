"""Fixtures of the ChatTTS engine tests: the tiny checkpoint and an engine loaded from it."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.workers.engines.chattts.service import client, make_client, service  # noqa: F401 (the service tests' fixtures)
from workers.engines.chattts.loading.checkpoint import build_tiny_checkpoint

# Locally the engine tests need the chattts extra; in CI (CI=true) or with
# CHATTTS_REQUIRE_CHATTTS=1 a missing extra fails them instead of skipping them.
HAVE_CHATTTS = all(importlib.util.find_spec(m) is not None for m in ("ChatTTS", "torch"))
REQUIRE_CHATTTS = any(
    os.environ.get(name, "").lower() not in ("", "0", "false", "no")
    for name in ("CI", "CHATTTS_REQUIRE_CHATTTS")
)
requires_chattts = pytest.mark.skipif(
    not HAVE_CHATTTS and not REQUIRE_CHATTTS,
    reason="needs the chattts extra: pip install '.[chattts]'",
)
# The engine tests run on the CPU; bench/gpu_check.sh runs them again with this set to "cuda".
TEST_DEVICE_ENV = "CHATTTS_TEST_DEVICE"
# The tiny model's per-segment budget in these tests: rows end after ~40 tokens on average.
TEST_MAX_NEW_TOKEN = 160


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random-weight ChatTTS checkpoint, usable as CHATTTS_MODEL_DIR."""
    return build_tiny_checkpoint(tmp_path_factory.mktemp("chattts") / "model")


def _load_engine(checkpoint: Path, runtime: str) -> Any:
    import torch

    from core.infra.settings import Settings
    from workers.engines.chattts import create

    # One thread: on a small shared CPU, OpenMP threads waiting on each other cost more than
    # they give for a model this small.
    torch.set_num_threads(1)
    device = os.environ.get(TEST_DEVICE_ENV, "cpu")
    # float32: the tests assert that a seeded row draws the same codes whatever its batch.
    settings = Settings.of(
        model_dir=str(checkpoint), device=device, max_batch=8, runtime=runtime, dtype="float32"
    )
    engine = create(settings)
    engine.load()
    engine.warmup()
    # The library's engine itself, not the batch adapter around it: its tests set its limits.
    return getattr(engine, "engine", engine)


@pytest.fixture(scope="session")
def loaded_engine(tiny_checkpoint: Path) -> Any:
    return _load_engine(tiny_checkpoint, "ours")


@pytest.fixture(scope="session")
def loaded_library_engine(tiny_checkpoint: Path) -> Any:
    return _load_engine(tiny_checkpoint, "library")


def _restored(engine: Any) -> Iterator[Any]:
    engine.max_new_token = TEST_MAX_NEW_TOKEN
    engine.max_batch = 8
    yield engine
    engine.inject_oom(None)
    if engine.runtime is not None:
        engine.runtime.scheduler.max_rows = engine.runtime.decoder.slots


@pytest.fixture
def engine(loaded_engine: Any) -> Iterator[Any]:
    """The session's engine on our decode runtime, test limits restored after each test."""
    yield from _restored(loaded_engine)


@pytest.fixture
def library_engine(loaded_library_engine: Any) -> Iterator[Any]:
    """The same checkpoint through ChatTTS's own `infer` (CHATTTS_RUNTIME=library)."""
    yield from _restored(loaded_library_engine)
