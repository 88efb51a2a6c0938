"""`chattts-online models`: what it says when the downloader it needs is not installed."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tests.support.commands import command

ROOT = Path(__file__).resolve().parents[2]


def test_pull_without_the_chattts_extra_says_how_to_get_it(tmp_path: Path) -> None:
    """Without huggingface_hub (the chattts extra), the advice is to install ChatTTS, never
    "run it again: it resumes"."""
    shadow = tmp_path / "shadow" / "huggingface_hub"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'huggingface_hub'\", name='huggingface_hub')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "shadow"), "CHATTTS_MODEL_DIR": str(tmp_path)}
    done = command([sys.executable, "-m", "cli", "models", "pull"], ROOT, env)
    assert done.returncode != 0
    assert "huggingface_hub is not installed" in done.stderr, done.stderr
    assert "make install-chattts" in done.stderr and "resumes" not in done.stderr
