"""The runtime tests' model: the tiny architecture with rows that never end by themselves."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from workers.engines.chattts.loading.checkpoint import build_checkpoint


@pytest.fixture(scope="module")
def endless_chat(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The tiny architecture with rows that never end by themselves: each runs its budget."""
    from workers.engines.chattts.loading import loader

    root = build_checkpoint(tmp_path_factory.mktemp("endless") / "model", shape_eos=False)
    return loader.load_chat(loader.locate(str(root)), torch.device("cpu"))
