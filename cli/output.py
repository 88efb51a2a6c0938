"""The CLI's output: the file written (or stdout), PCM pieces encoded into one file, and the
progress bar on stderr."""

from __future__ import annotations

import contextlib
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import soundfile as sf

from cli.errors import USAGE, CliError
from core.audio.catalog import CATALOG
from core.audio.formats import SAMPLE_RATE
from core.audio.stream_encode import StreamEncoder, write_sliced


@contextlib.contextmanager
def opened(output: str) -> Any:
    """A binary file to write: stdout for `-`, else a temporary file renamed on success."""
    if output == "-":
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    path = Path(output)
    partial = path.with_name(f".{path.name}.part")
    try:
        with partial.open("wb") as file:
            yield file
        partial.replace(path)
    except OSError as exc:
        raise CliError(f"cannot write {output}: {exc}", USAGE) from None
    finally:
        partial.unlink(missing_ok=True)


class PcmWriter:
    """Writes 16-bit PCM pieces as one file of `fmt`: libsndfile on a real file (its headers are
    completed at the end), the incremental encoder on a pipe and for AAC."""

    def __init__(self, file: IO[bytes], fmt: str, seekable: bool) -> None:
        self.file = file
        self.sound: Any = None
        self.encoder: StreamEncoder | None = None
        if fmt == "pcm":
            return
        if seekable and CATALOG[fmt].sndfile is not None:
            container, subtype = CATALOG[fmt].sndfile or ("", "")
            self.sound = sf.SoundFile(file, "w", SAMPLE_RATE, 1, format=container, subtype=subtype)
        else:
            self.encoder = StreamEncoder(fmt, SAMPLE_RATE)

    def write(self, pcm: bytes) -> None:
        if self.sound is not None:
            write_sliced(self.sound, np.frombuffer(pcm, "<i2").astype(np.float32) / 32767.0)
        elif self.encoder is not None:
            self.file.write(self.encoder.feed(pcm))
        else:
            self.file.write(pcm)

    def close(self) -> None:
        if self.sound is not None:
            self.sound.close()
        elif self.encoder is not None:
            self.file.write(self.encoder.close())


# -- progress -----------------------------------------------------------------------------------


@dataclass
class Progress:
    """Segments done across the parts of a text, drawn on stderr (one line per change when
    stderr is not a terminal)."""

    sizes: list[int]  # characters per part: the bar's weights
    stream: IO[str] = field(default_factory=lambda: sys.stderr)
    done: dict[int, tuple[int, int]] = field(default_factory=dict)  # part -> (done, total)
    last: str = ""
    eta: float | None = None  # when the part being made should end (unix time), by the server

    def update(self, part: int, done: int, total: int, eta: float | None = None) -> None:
        self.done[part] = (done, max(total, done))
        self.eta = eta
        self.draw()

    def draw(self) -> None:
        weight = sum(self.sizes) or 1
        fraction = (
            sum(self.sizes[p] * (d / t if t else 0.0) for p, (d, t) in self.done.items()) / weight
        )
        done = sum(d for d, _ in self.done.values())
        total = sum(t for _, t in self.done.values())
        unknown = "+" if len(self.done) < len(self.sizes) else ""
        bar = "#" * round(fraction * 30)
        parts = f", part {len(self.done)}/{len(self.sizes)}" if len(self.sizes) > 1 else ""
        line = f"[{bar:<30}] {done}/{total}{unknown} segments{parts}"
        if self.eta is not None and done < total:
            left = max(0, round(self.eta - time.time()))
            line += f", about {left // 60}m{left % 60:02d}s left"
        if line == self.last:
            return
        previous, self.last = self.last, line
        if self.stream.isatty():
            self.stream.write(f"\r{line:<{len(previous)}}")  # spaces over a longer line
        else:
            self.stream.write(f"{line}\n")
        self.stream.flush()

    def finish(self) -> None:
        if self.last and self.stream.isatty():
            self.stream.write("\n")
            self.stream.flush()
