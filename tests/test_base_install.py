"""The service as a fresh machine gets it from `pip install .` alone (no extras, no dev tools):
its processes import, and the speech check hears English with numbers in it (their words come
from a base dependency, not the chattts extra)."""

from __future__ import annotations

import subprocess
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_CHECK = """
import asyncio, logging, sys
logging.basicConfig(level=logging.WARNING)
import web.app, workers.process, cli.main  # every process's entry point imports
from core.infra.settings import Settings
from core.queue.job import SynthesisRequest
from workers.checks.checker import Checker
from workers.checks.recognizers.pocketsphinx import Pocketsphinx
from workers.engines.base import SAMPLE_RATE, Segment
from workers.engines.espeak import EspeakEngine

TEXT = "I bought 3 apples and 12 oranges for 20 dollars."

async def main():
    engine = EspeakEngine(Settings())
    engine.load()
    request = SynthesisRequest(text=TEXT, voice="en_female")  # the voice the check is told
    audio = engine.synthesize([Segment("base", 0, TEXT, request)])[0]
    checker = Checker(Pocketsphinx(timeout_s=60))
    await checker.start()
    try:
        verdict = await checker.check(audio, SAMPLE_RATE, TEXT, voice="en_female")
    finally:
        await checker.close()
    print("VERDICT", verdict.state, verdict.unheard or "")

asyncio.run(main())
"""


@pytest.mark.timeout(600)
def test_the_base_install_hears_numbers(tmp_path: Path) -> None:
    home = tmp_path / "venv"
    venv.create(home, with_pip=True)
    python = home / "bin" / "python"
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(ROOT)],
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    # Run from elsewhere: the installed package, not this checkout, is what is imported.
    run = subprocess.run(
        [str(python), "-c", _CHECK], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "VERDICT passed" in run.stdout, run.stdout + run.stderr[-3000:]
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
