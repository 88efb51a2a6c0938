"""The host's part of the browser tests: which browsers are installed, and the virtual display
and sound card that Firefox and WebKit need (started by the tests)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from tests.browser.engines import CHROMIUM, FIREFOX, HEIGHT, MINIBROWSER, WEBKIT_DRIVER, WIDTH


def missing(engine: str) -> str | None:
    """What this machine lacks to run `engine` (None: nothing)."""
    needs = {
        "chromium": [CHROMIUM],
        "firefox": [FIREFOX, "pulseaudio"],
        "webkit": [WEBKIT_DRIVER, MINIBROWSER, "Xvfb"],
    }[engine]
    absent = [n for n in needs if not (Path(n).exists() or shutil.which(n))]
    if absent:
        return f"{engine} needs {', '.join(absent)} (.ci/run installs them with apt-get)"
    return None


@contextlib.contextmanager
def virtual_display() -> Iterator[dict[str, str]]:
    """An Xvfb server on a free display number (Xvfb picks it): WebKitWebDriver needs a screen."""
    read, write = os.pipe()
    process = subprocess.Popen(
        [
            "Xvfb",
            "-displayfd",
            str(write),
            "-screen",
            "0",
            f"{WIDTH}x{HEIGHT}x24",
            "-nolisten",
            "tcp",
        ],
        pass_fds=(write,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(write)
    try:
        with os.fdopen(read) as pipe:
            number = pipe.readline().strip()
        if not number:
            raise RuntimeError("Xvfb did not start")
        yield {"DISPLAY": f":{number}"}
    finally:
        process.terminate()
        process.wait(10)


@contextlib.contextmanager
def virtual_sound_card(runtime_dir: Path) -> Iterator[dict[str, str]]:
    """A PulseAudio server of our own with a null sink (a sound card that plays into nothing),
    in its own runtime directory: the environment that points a browser at it."""
    runtime_dir.mkdir(parents=True, exist_ok=True)
    runtime_dir.chmod(0o700)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime_dir), "HOME": str(runtime_dir)}
    command = [
        "pulseaudio", "--daemonize=no", "--exit-idle-time=-1", "--disallow-exit", "-n",
        "--use-pid-file=no", "--load=module-native-protocol-unix auth-anonymous=1",
        "--load=module-null-sink",
    ]  # fmt: skip
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    socket_path = runtime_dir / "pulse" / "native"
    deadline = time.monotonic() + 15
    while not socket_path.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError("PulseAudio did not start")
        time.sleep(0.05)
    try:
        yield {"XDG_RUNTIME_DIR": str(runtime_dir), "PULSE_SERVER": f"unix:{socket_path}"}
    finally:
        process.terminate()
        process.wait(10)
