"""`chattts-online say --live` as a user runs it: text written slowly into its stdin, a real web
process with a live session and an espeak worker, the audio it writes and what it prints."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from core.infra.embedded_redis import free_port
from core.infra.settings import Settings
from tests.conftest import ROOT, WorkerProcess
from tests.web.webproc import WebProcess

SENTENCES = [
    "The first sentence is spoken while the rest is still being written.",
    "A second one follows it, a little later.",
    "And the third ends the text.",
]


@pytest.fixture
def server(settings: Settings, tmp_path: Path) -> Iterator[str]:
    web = WebProcess(settings, tmp_path / "web.log").wait_ready()
    yield web.url
    web.stop()


class Cli:
    """`python -m cli say --live ...` with its stdin to write and its outputs read as they come."""

    def __init__(self, url: str, *args: str) -> None:
        env = {**os.environ, "CHATTTS_URL": url}
        env.pop("CHATTTS_API_KEY", None)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "cli", "say", "--live", *args],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.stdout = bytearray()
        self.stderr: list[str] = []
        self._readers = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        while data := self.process.stdout.read1(1 << 16):  # type: ignore[attr-defined]
            self.stdout += data

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line.decode().rstrip("\n"))

    def type(self, text: str, piece: int = 7, pause_s: float = 0.03) -> None:
        """Write `text` into stdin a few characters at a time, as a language model would."""
        assert self.process.stdin is not None
        data = text.encode()
        for start in range(0, len(data), piece):
            self.process.stdin.write(data[start : start + piece])
            self.process.stdin.flush()
            time.sleep(pause_s)

    def end(self, timeout: float = 90.0) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        code = self.process.wait(timeout)
        for reader in self._readers:
            reader.join(5)
        return code


def _wait_for(condition: Callable[[], object], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_live_pipe_speaks_while_the_text_is_written(server: str, worker: WorkerProcess) -> None:
    """Raw PCM on stdout from the first sentence on, while stdin is still open."""
    cli = Cli(server, "--voice", "en_female")
    text = " ".join(SENTENCES)
    # The first sentence and the first letter of the next (a full stop before a lower-case word
    # would not end it): enough to speak it, while the rest is still to come.
    written = len(SENTENCES[0]) + 2
    cli.type(text[:written])
    _wait_for(lambda: len(cli.stdout) > 24_000, f"no audio before the end: {cli.stderr}")
    _wait_for(lambda: cli.stderr, "no sentence printed")
    assert cli.stderr[:1] == [SENTENCES[0]], cli.stderr  # the spoken sentence, as it ended
    assert cli.process.poll() is None  # still reading its input
    cli.type(text[written:])
    assert cli.end() == 0, cli.stderr
    assert cli.stderr[:3] == SENTENCES, cli.stderr
    assert cli.stderr[-1].startswith("spoke 3 segments, "), cli.stderr
    pcm = np.frombuffer(bytes(cli.stdout), "<i2")
    seconds = pcm.size / 24_000
    assert 4.0 < seconds < 30.0
    assert float(np.sqrt(np.mean((pcm / 32768.0) ** 2))) > 0.01  # speech, not silence
    announced = float(cli.stderr[-1].split(", ")[1].removesuffix(" s"))
    assert abs(announced - seconds) < 0.2  # the audio_ms of `done` is what came


def test_live_into_a_wav_file(server: str, worker: WorkerProcess, tmp_path: Path) -> None:
    out = tmp_path / "live.wav"
    cli = Cli(server, "-o", str(out))
    cli.type(" ".join(SENTENCES), piece=5, pause_s=0.02)
    assert cli.end() == 0, cli.stderr
    assert cli.stderr[:3] == SENTENCES, cli.stderr
    assert cli.stderr[-1].endswith(f"; wrote {out}")
    samples, rate = sf.read(out, dtype="float32")  # a header that says how long it is
    assert rate == 24_000 and sf.info(out).format == "WAV"
    assert 4.0 < len(samples) / rate < 30.0
    assert cli.stdout == b""
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_live_errors(server: str, worker: WorkerProcess, tmp_path: Path) -> None:
    cli = Cli(server, "--voice", "nobody", "-o", str(tmp_path / "x.wav"))
    cli.type("Hello there.")
    assert cli.end() == 4, cli.stderr
    assert "nobody" in cli.stderr[-1] and cli.stderr[-1].startswith("chattts-online say: ")
    assert not (tmp_path / "x.wav").exists()

    cli = Cli(server, "-o", str(tmp_path / "x.wav"))
    assert cli.end() == 2 and cli.stderr[-1] == "chattts-online say: the text is empty"

    cli = Cli(f"http://127.0.0.1:{free_port()}", "-o", str(tmp_path / "x.wav"))
    cli.type("Nobody listens.")
    assert cli.end() == 3 and "cannot reach the server" in cli.stderr[-1]
