"""`chattts-online say` and `submit` as a user runs them: real processes against a real server."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
import redis
import soundfile as sf
import srt

from core.infra.embedded_redis import free_port
from core.infra.settings import Settings
from core.queue.keys import Keys
from core.text.sentences import clean_text, split_sentences
from tests.conftest import ROOT, WorkerProcess

BOOK = (
    "Chapter one. It was a bright cold day in April, and the clocks were striking thirteen. "
    "The hallway smelt of boiled cabbage and old rag mats. "
) * 8


@contextlib.contextmanager
def _serve(settings: Settings, log: Path) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, **settings.replace(port=port).to_env()}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "cli", "web"], cwd=ROOT, env=env, stdout=out, stderr=out
        )
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{url}/healthz", timeout=1):
                    break
            except OSError:
                assert process.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.05)
        try:
            yield url
        finally:
            process.terminate()
            process.wait(15)


@pytest.fixture
def server(settings: Settings, tmp_path: Path) -> Iterator[str]:
    """A `chattts-online web` process (workers come from the `worker` fixture, or not at all)."""
    with _serve(settings, tmp_path / "web.log") as url:
        yield url


def cli(
    url: str, *args: str, stdin: bytes = b"", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    environment = {**os.environ, "CHATTTS_URL": url}
    environment.pop("CHATTTS_API_KEY", None)
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "cli", *args],
        cwd=ROOT,
        env=environment,
        input=stdin,
        capture_output=True,
        timeout=90,
    )


def _seconds(path: Path) -> float:
    samples, rate = sf.read(path, dtype="float32")
    assert float(np.sqrt(np.mean(samples**2))) > 0.01  # speech, not silence
    return float(len(samples) / rate)


def test_say_round_trips(server: str, worker: WorkerProcess, tmp_path: Path) -> None:
    out = tmp_path / "hello.wav"
    done = cli(server, "say", "Hello from the command line.", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert 1.0 < _seconds(out) < 8.0
    assert str(out) in done.stderr.decode()
    # Text on stdin, a Mandarin voice, the format from the extension, no partial file left.
    out = tmp_path / "nihao.flac"
    done = cli(server, "say", "--voice", "zh_male", "-o", str(out), stdin="你好，世界。".encode())
    assert done.returncode == 0, done.stderr
    assert _seconds(out) > 0.5
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    # To stdout: raw PCM streams out, 16-bit at 24 kHz.
    done = cli(server, "say", "Streaming to a pipe.", "-o", "-", "--format", "pcm")
    assert done.returncode == 0, done.stderr
    pcm = np.frombuffer(done.stdout, "<i2")
    assert 1.0 < pcm.size / 24_000 < 8.0
    # The default format is mp3, written next to nothing: speech.mp3 when stdout is a pipe...
    done = cli(server, "say", "Default format.", "-o", str(tmp_path / "default.mp3"))
    assert done.returncode == 0 and _seconds(tmp_path / "default.mp3") > 0.5


def test_submit_long_text_with_progress(server: str, worker: WorkerProcess, tmp_path: Path) -> None:
    book = tmp_path / "book.txt"
    book.write_text(BOOK, encoding="utf-8")
    done = cli(server, "submit", "-f", str(book), "--max-chars", "600", "--voice", "en_female")
    assert done.returncode == 0, done.stderr
    out = tmp_path / "book.mp3"  # next to the input, the default format's extension
    assert 40.0 < _seconds(out) < 240.0
    lines = done.stderr.decode().splitlines()
    bars = [line for line in lines if "segments" in line]
    assert len(bars) >= 3, lines
    parts = len(split_sentences(clean_text(BOOK), 600))
    assert parts > 1 and bars[-1].endswith(f"part {parts}/{parts}")
    assert bars[-1].startswith("[" + "#" * 30 + "]")
    done_counts = [int(line.split("] ")[1].split("/")[0]) for line in bars]
    assert done_counts == sorted(done_counts) and done_counts[-1] > 3
    assert lines[-1] == f"wrote {out}"

    # One part: the job's own file, in the format of -o.
    short = tmp_path / "short.txt"
    short.write_text("Just one short paragraph.", encoding="utf-8")
    out = tmp_path / "short-speech.ogg"
    done = cli(server, "submit", "-f", str(short), "-o", str(out), "--voice", "alloy")
    assert done.returncode == 0, done.stderr  # an OpenAI voice name, as the help says
    assert sf.info(out).format == "OGG" and _seconds(out) > 0.5


def test_errors_and_exit_codes(server: str, tmp_path: Path) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    done = cli(nowhere, "say", "hi", "-o", str(tmp_path / "x.mp3"))
    assert done.returncode == 3 and "cannot reach the server" in done.stderr.decode()
    assert not (tmp_path / "x.mp3").exists()

    done = cli(server, "say", "hi", "--voice", "nobody", "-o", str(tmp_path / "x.mp3"))
    assert done.returncode == 4
    assert "unknown voice 'nobody'" in done.stderr.decode() and "HTTP 400" in done.stderr.decode()
    done = cli(server, "say", "x" * 5000, "-o", str(tmp_path / "x.mp3"))
    assert done.returncode == 4 and "4000" in done.stderr.decode()  # the server's own limit

    for args in (("say", "hi", "-o", str(tmp_path / "x.xyz")), ("say", "-o", "x.mp3")):
        done = cli(server, *args)
        assert done.returncode == 2, args
        assert done.stderr.decode().startswith("chattts-online say: ")
    assert cli(server, "say", "hi", "--speed", "fast").returncode == 2  # argparse
    # `say`'s help lists what /v1/audio/speech makes, and only that.
    done = cli(server, "say", "hi", "--format", "ogg")
    assert done.returncode == 2 and "invalid choice: 'ogg'" in done.stderr.decode()
    done = cli(server, "submit", "-f", str(tmp_path / "missing.txt"))
    assert done.returncode == 2 and "cannot read" in done.stderr.decode()


def test_api_key(settings: Settings, worker: WorkerProcess, tmp_path: Path) -> None:
    with _serve(settings.replace(api_keys="sesame"), tmp_path / "web.log") as url:
        done = cli(url, "say", "hi", "-o", str(tmp_path / "x.wav"))
        assert done.returncode == 4 and "API key" in done.stderr.decode()
        key = {"CHATTTS_API_KEY": "sesame"}
        done = cli(url, "say", "hi", "-o", str(tmp_path / "x.wav"), env=key)
        assert done.returncode == 0, done.stderr
        out = str(tmp_path / "y.wav")
        done = cli(url, "submit", "-o", out, "--api-key", "sesame", stdin=b"Hi.")
        assert done.returncode == 0, done.stderr


def _active_jobs(settings: Settings, timeout: float = 20.0) -> list[str]:
    """Ids of the jobs the CLI submitted, once there are some."""
    client = redis.Redis.from_url(settings.redis.redis_url or "")
    keys = Keys(settings.redis.key_prefix, settings.redis.queue)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            found = client.keys(keys.job("*"))
            if found:
                return [k.decode().rsplit(":", 1)[1] for k in found]  # type: ignore[union-attr]
            time.sleep(0.05)
    finally:
        client.close()
    raise TimeoutError("the CLI submitted nothing")


def test_failed_job_exits_1(
    server: str, settings: Settings, start_worker: Callable[..., WorkerProcess], tmp_path: Path
) -> None:
    """A registered voice deleted before a worker takes the job: the job fails, exit code 1."""
    client = redis.Redis.from_url(settings.redis.redis_url or "")
    keys = Keys(settings.redis.key_prefix, settings.redis.queue)
    client.hset(keys.voices, "ghost", orjson.dumps({"name": "ghost"}))
    out = tmp_path / "ghost.wav"
    process = subprocess.Popen(
        [sys.executable, "-m", "cli", "submit", "--voice", "ghost", "-o", str(out)],
        cwd=ROOT,
        env={**os.environ, "CHATTTS_URL": server},
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdin is not None and process.stderr is not None
    process.stdin.write(b"Boo.")
    process.stdin.close()
    _active_jobs(settings)
    client.hdel(keys.voices, "ghost")
    client.close()
    start_worker()
    assert process.wait(30) == 1
    message = process.stderr.read().decode()
    assert "failed: voice 'ghost' is not registered" in message
    assert not out.exists()


def _jobs_in_redis(settings: Settings) -> list[str]:
    client = redis.Redis.from_url(settings.redis.redis_url or "")
    keys = Keys(settings.redis.key_prefix, settings.redis.queue)
    try:
        return [k.decode().rsplit(":", 1)[1] for k in client.keys(keys.job("*"))]  # type: ignore[union-attr]
    finally:
        client.close()


def _job_states(settings: Settings) -> dict[str, bytes | None]:
    client = redis.Redis.from_url(settings.redis.redis_url or "")
    keys = Keys(settings.redis.key_prefix, settings.redis.queue)
    try:
        return {j: client.hget(keys.job(j), "state") for j in _jobs_in_redis(settings)}  # type: ignore[misc]
    finally:
        client.close()


# Many small parts: the CLI submits a window of 16 jobs one after another, then follows them.
LONG_BOOK = BOOK * 3
SMALL_PARTS = "100"
WINDOW = 16


@pytest.mark.parametrize("moment", ["submitting", "following"])
def test_ctrl_c_cancels_the_jobs(
    server: str, settings: Settings, tmp_path: Path, moment: str
) -> None:
    """No worker: the jobs wait. Ctrl-C while the jobs are being submitted (some submissions on
    the wire) or while their events are followed: every job the run made ends cancelled, also
    one whose submission was in flight, and the CLI exits 130 promptly."""
    book = tmp_path / "book.txt"
    book.write_text(LONG_BOOK, encoding="utf-8")
    assert len(split_sentences(clean_text(LONG_BOOK), int(SMALL_PARTS))) > WINDOW
    process = subprocess.Popen(
        [sys.executable, "-m", "cli", "submit", "-f", str(book), "--max-chars", SMALL_PARTS],
        cwd=ROOT,
        env={**os.environ, "CHATTTS_URL": server},
        stderr=subprocess.PIPE,
    )
    wanted = 1 if moment == "submitting" else WINDOW
    deadline = time.monotonic() + 30
    while len(_jobs_in_redis(settings)) < wanted:
        assert time.monotonic() < deadline and process.poll() is None, "the CLI submitted nothing"
        time.sleep(0.005)
    if moment == "following":
        time.sleep(0.3)  # the first job's event stream is open
    process.send_signal(signal.SIGINT)
    sent = time.monotonic()
    assert process.wait(15) == 130, process.stderr.read().decode()  # type: ignore[union-attr]
    assert time.monotonic() - sent < 10
    assert "interrupted" in process.stderr.read().decode()  # type: ignore[union-attr]
    states = _job_states(settings)
    assert 0 < len(states) <= WINDOW
    assert set(states.values()) == {b"cancelled"}, states
    assert not (tmp_path / "book.mp3").exists()
    assert not (tmp_path / ".book.mp3.part").exists()


@contextlib.contextmanager
def _stuck_submission(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A `submit` whose first request reached a server that accepted it and never answers."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        process = subprocess.Popen(
            [sys.executable, "-m", "cli", "submit", "-o", str(tmp_path / "out.wav")],
            cwd=ROOT,
            env={**os.environ, "CHATTTS_URL": url},
            stdin=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert process.stdin is not None
        process.stdin.write(b"Hello there.")
        process.stdin.close()
        silent.settimeout(30)
        connection, _ = silent.accept()  # the submission is on the wire
        with connection:
            try:
                yield process
            finally:
                process.kill()
                process.wait()


def test_ctrl_c_before_the_first_job_lands(tmp_path: Path) -> None:
    """Ctrl-C while the first submission waits on a server that never answers still ends the
    CLI with 130 within its grace period, writing nothing."""
    with _stuck_submission(tmp_path) as process:
        process.send_signal(signal.SIGINT)
        sent = time.monotonic()
        assert process.wait(15) == 130
        assert time.monotonic() - sent < 10
        assert "interrupted" in process.stderr.read().decode()  # type: ignore[union-attr]
    assert not list(tmp_path.iterdir())


def test_a_second_ctrl_c_exits_at_once(tmp_path: Path) -> None:
    """While the first Ctrl-C waits for a submission that will never land, a second one ends
    the process at once."""
    with _stuck_submission(tmp_path) as process:
        process.send_signal(signal.SIGINT)
        stderr = process.stderr
        assert stderr is not None
        while b"Ctrl-C again" not in (line := stderr.readline()):  # the first one was seen
            assert line, "the CLI ended without a word"
        assert process.poll() is None  # still waiting for the submission to land
        process.send_signal(signal.SIGINT)
        assert process.wait(5) == 130
        assert "interrupted again" in stderr.read().decode()


def test_wav_to_a_pipe_is_a_stream(server: str, worker: WorkerProcess, tmp_path: Path) -> None:
    """A multi-part text written to stdout: a WAV of unknown length that decoders still read."""
    done = cli(server, "submit", "--max-chars", "300", "--format", "wav", stdin=BOOK.encode())
    assert done.returncode == 0, done.stderr
    samples, rate = sf.read(io.BytesIO(done.stdout))
    assert rate == 24_000 and len(samples) / rate > 40.0


def test_a_book_is_one_job_with_its_subtitles_beside_it(
    settings: Settings, tmp_path: Path, start_worker: Any
) -> None:
    # A server whose jobs hold 500 characters: the book (1128) is a document, sent as one job.
    with _serve(settings.replace(max_text_chars=500), tmp_path / "web.log") as url:
        start_worker()
        book = tmp_path / "book.txt"
        book.write_text(BOOK, encoding="utf-8")
        out = tmp_path / "book.wav"
        done = cli(url, "submit", "-f", str(book), "-o", str(out), "--subtitles", "srt")
        assert done.returncode == 0, done.stderr
        client = redis.Redis.from_url(settings.redis.redis_url or "")
        try:
            stats: Any = client.hgetall(Keys(settings.redis.key_prefix, settings.redis.queue).stats)
        finally:
            client.close()
        assert int(stats[b"submitted"]) == 1  # one job, not one per part
    lines = done.stderr.decode().splitlines()
    assert any("left" in line for line in lines if "segments" in line), lines
    assert lines[-2:] == [f"wrote {out}", f"wrote {tmp_path / 'book.srt'}"]
    cues = list(srt.parse((tmp_path / "book.srt").read_text(encoding="utf-8")))
    assert len(cues) > 2 and cues[0].content.startswith("Chapter one.")
    assert abs(cues[-1].end.total_seconds() - _seconds(out)) < 0.02
