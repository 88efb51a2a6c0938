"""Incremental audio encoders: a stream encoded piece by piece, each piece sendable at once.

Used for streamed responses (segments leave as they finish) and for the whole files FFmpeg writes
(every format but PCM, WAV and Ogg Vorbis: core/audio/catalog.py). Input is 16-bit
little-endian mono PCM; output bytes need no later rewrite:

* `pcm` passes through;
* `wav` starts with a header for a stream of unknown length (RIFF and data sizes 0xFFFFFFFF, as
  OpenAI streams WAV; decoders read to the end of the stream);
* `mp3`, `opus` (in Ogg), `flac` and `aac` (ADTS) go through FFmpeg's encoders and muxers (the
  `av` package, PyAV, whose wheels bundle FFmpeg), writing to an output that cannot seek: no
  header is patched at the end. A streamed FLAC therefore says "total samples: unknown" in its
  STREAMINFO, as the FLAC format allows for streams;
* `ogg` (Vorbis) goes through libsndfile, which writes Ogg pages in order and never seeks back
  (FFmpeg's wheels carry no mono Vorbis encoder).
"""

from __future__ import annotations

import io
import struct
from types import ModuleType
from typing import Any

import numpy as np
import soundfile as sf

from core.audio.catalog import AV_FORMATS, CATALOG, MAX_FRAMES_PER_WRITE

# Ogg pages are cut at least this often (µs), so that Opus leaves in small steps.
_OGG_PAGE_DURATION_US = 100_000
_UNKNOWN = 0xFFFFFFFF  # a streamed WAV's sizes: "until the end"
_PCM16 = 2  # bytes per sample


# Ogg pages of a bounded duration (a stream's pages leave as they fill). MP3 as bare frames: no
# ID3 tag and no Xing/LAME frame, so that answers join by concatenation (Home Assistant joins
# pieces, and a device refused the tags) and a stream is the same bytes as the whole file.
_MUXER_OPTIONS = {
    "ogg": {"page_duration": str(_OGG_PAGE_DURATION_US)},
    "mp3": {"id3v2_version": "0", "write_xing": "0"},
}


class EncoderUnavailable(Exception):
    """The format needs the `av` package, which is not installed."""


def load_av() -> ModuleType:
    try:
        import av
    except ImportError:  # pragma: no cover - av is a dependency; this names the fix if missing
        raise EncoderUnavailable(
            "this format needs the 'av' package (PyAV, FFmpeg's encoders): pip install av"
        ) from None
    return av


def wav_header(samples: int | None, rate: int) -> bytes:
    """The canonical 44-byte header of 16-bit mono PCM; `samples=None`: a stream's, whose RIFF
    and data sizes say "until the end" (0xFFFFFFFF, which FFmpeg and browsers read so). Written
    here: the standard library's `wave` and libsndfile write a header only with the samples."""
    data = _UNKNOWN if samples is None else samples * _PCM16
    return struct.pack(
        "<4sI4s4sIHHIIHH4sI",
        b"RIFF",
        _UNKNOWN if samples is None else 36 + data,
        b"WAVE",
        b"fmt ",
        16,  # the fmt chunk's size
        1,  # PCM
        1,  # mono
        rate,
        rate * _PCM16,  # bytes per second
        _PCM16,  # block align
        16,  # bits per sample
        b"data",
        data,
    )


def to_pcm16(samples: np.ndarray) -> bytes:
    """Float samples in [-1, 1] as 16-bit little-endian PCM, converted by libsndfile: the very
    samples it writes into the same job's WAV or FLAC (its float-to-int rounding is its own)."""
    clipped = np.clip(np.asarray(samples, dtype=np.float32), -1.0, 1.0)
    buffer = io.BytesIO()
    # RAW stores no rate: any will do.
    with sf.SoundFile(
        buffer, "w", 24_000, 1, format="RAW", subtype="PCM_16", endian="LITTLE"
    ) as out:
        write_sliced(out, clipped)
    return buffer.getvalue()


def write_sliced(out: sf.SoundFile, samples: np.ndarray) -> None:
    """Write `samples` in slices libsndfile is known to take (core/audio/catalog.py)."""
    for start in range(0, len(samples), MAX_FRAMES_PER_WRITE):
        out.write(samples[start : start + MAX_FRAMES_PER_WRITE])


def _slices(pcm: bytes) -> list[bytes]:
    """16-bit PCM cut into pieces a native encoder is known to take."""
    step = MAX_FRAMES_PER_WRITE * _PCM16
    return [pcm[start : start + step] for start in range(0, len(pcm), step)]


class _Sink:
    """The write-only, non-seekable output FFmpeg muxes into; `take` empties it."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.written = 0

    def write(self, chunk: Any) -> int:
        self.data += chunk
        self.written += len(chunk)
        return len(chunk)

    def take(self) -> bytes:
        out = bytes(self.data)
        self.data.clear()
        return out


class _SoundSink(_Sink):
    """The same for libsndfile, which asks where it is (and seeks there, at the start): a seek
    back would rewrite bytes already sent, so the next `take` fails. (FFmpeg is given no `seek`
    at all: it would take the output for a file and go back to complete a header.)"""

    def tell(self) -> int:
        return self.written

    refused = False  # a seek back was asked: libsndfile swallows a callback's exception

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if offset + (self.written if whence != io.SEEK_SET else 0) != self.written:
            self.refused = True
        return self.written

    def take(self) -> bytes:
        if self.refused:
            raise OSError("libsndfile went back over bytes already sent: not a stream")
        return super().take()

    def read(self, size: int = -1) -> bytes:
        return b""


class _File(io.BytesIO):
    """A whole file's output: FFmpeg may seek back in it to complete its headers (an MP3's LAME
    frame, which tells players its exact length; a FLAC's total samples). Read once, at the end."""

    def take(self) -> bytes:
        return b""


class StreamEncoder:
    """Encodes PCM pieces into one continuous stream of `fmt`. Not thread-safe: one user at a time
    (calls may come from different threads one after the other, e.g. via asyncio.to_thread)."""

    def __init__(
        self, fmt: str, sample_rate: int, bit_rate: int | None = None, whole: bool = False
    ) -> None:
        """`bit_rate` (bits/s): the format's own (core/audio/catalog.py) unless given. `whole`
        (FFmpeg's formats): one file, its bytes all returned by `close`, its headers complete."""
        self.fmt = fmt
        self.sample_rate = sample_rate
        self.bit_rate = bit_rate
        self._started = False
        self._closed = False
        self._av: ModuleType | None = None
        self._whole = whole
        self._sink: _Sink | _File = _File() if whole else _Sink()
        self._container: Any = None
        self._stream: Any = None
        self._sound: Any = None  # libsndfile's writer (Vorbis)
        if fmt in AV_FORMATS:
            self._open()
        elif fmt not in ("wav", "pcm"):
            container, subtype = CATALOG[fmt].sndfile or ("", "")
            self._sink = _SoundSink()
            self._sound = sf.SoundFile(
                self._sink, "w", sample_rate, 1, format=container, subtype=subtype
            )

    def _open(self) -> None:
        av = self._av = load_av()
        container_name, codec, bit_rate = AV_FORMATS[self.fmt]
        bit_rate = self.bit_rate or bit_rate
        options = dict(_MUXER_OPTIONS.get(container_name, {}))
        if self._whole:
            options.pop("write_xing", None)  # a file: its LAME frame says its exact length
        self._container = av.open(self._sink, "w", format=container_name, options=options)
        stream = self._container.add_stream(codec, rate=self.sample_rate, layout="mono")
        if bit_rate:
            stream.bit_rate = bit_rate
        self._stream = stream

    def feed(self, pcm: bytes) -> bytes:
        """Encode the next piece (16-bit little-endian mono); the bytes ready to send now."""
        if self._closed:
            raise RuntimeError("the encoder is closed")
        if self._sound is not None:
            write_sliced(self._sound, np.frombuffer(pcm, dtype="<i2"))
            return self._sink.take()
        if self._container is None:
            if self.fmt == "wav" and not self._started:
                self._started = True
                return wav_header(None, self.sample_rate) + pcm
            return pcm
        assert self._av is not None
        for piece in _slices(pcm):
            samples = np.frombuffer(piece, dtype="<i2").reshape(1, -1)
            frame = self._av.AudioFrame.from_ndarray(samples, format="s16", layout="mono")
            frame.sample_rate = self.sample_rate
            for packet in self._stream.encode(frame):
                self._container.mux(packet)
        return self._sink.take()

    def close(self) -> bytes:
        """Flush the encoder; the last bytes of the stream."""
        if self._closed:
            return b""
        self._closed = True
        if self._sound is not None:
            self._sound.close()
            return self._sink.take()
        if self._container is None:
            if self.fmt == "wav" and not self._started:  # an empty stream is still a WAV
                self._started = True
                return wav_header(None, self.sample_rate)
            return b""
        for packet in self._stream.encode(None):
            self._container.mux(packet)
        self._container.close()
        return self._sink.getvalue() if isinstance(self._sink, _File) else self._sink.take()


def flac_with_total(head: bytes, samples: int) -> bytes:
    """A streamed FLAC's first bytes with its STREAMINFO's total samples written in, once known
    (a document's file: workers/documents.py), so that readers that need it (libsndfile) read
    it whole. STREAMINFO is the first block, after "fLaC" and its 4-byte header; the 36-bit count
    is its bits 108-143. By hand: no FLAC library here rewrites a header in bytes."""
    if head[:4] != b"fLaC" or head[4] & 0x7F != 0 or len(head) < 26:
        raise ValueError("not a FLAC stream that starts with its STREAMINFO")
    if samples >= 1 << 36:
        raise ValueError("more samples than STREAMINFO counts")
    field = bytearray(head[21:26])
    field[0] = (field[0] & 0xF0) | (samples >> 32)
    field[1:5] = (samples & 0xFFFFFFFF).to_bytes(4, "big")
    return head[:21] + bytes(field) + head[26:]


def encode_whole(samples: np.ndarray, sample_rate: int, fmt: str) -> bytes:
    """One complete file through the incremental encoder (FFmpeg's formats: core/audio/
    catalog.py), its headers completed at its end as a whole file's are."""
    encoder = StreamEncoder(fmt, sample_rate, whole=True)
    return encoder.feed(to_pcm16(samples)) + encoder.close()
