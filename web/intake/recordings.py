"""A voice's reference recording decoded to mono, its header checked before any sample is: WAV,
FLAC and Ogg through libsndfile, MP3 through FFmpeg (PyAV)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import numpy as np
import soundfile as sf

from core.audio.stream_encode import load_av

# What a recording may be before any sample is decoded: a decoded 8-channel, 655 kHz, 19 s FLAC
# of 1.45 MB once took 1.1 GB. Mono or stereo, 8-192 kHz.
MAX_RECORDING_CHANNELS = 2
RECORDING_RATES = (8_000, 192_000)
_UNREADABLE = "it could not be decoded as audio (send WAV, FLAC, Ogg or MP3)"
MAX_BAD_FRAMES = 8  # damaged MP3 frames skipped (a cut upload's last one) before refusing it


def is_mp3(audio: bytes) -> bool:
    """An ID3 tag or an MPEG audio frame's sync word first. MP3 goes to FFmpeg: libsndfile's
    MP3 decoder (libmpg123) writes its complaints about a damaged file straight to the process's
    stderr, a line per bad frame, past any logging."""
    return audio[:3] == b"ID3" or (len(audio) > 1 and audio[0] == 0xFF and audio[1] & 0xE0 == 0xE0)


def probe(audio: bytes, span: tuple[float, float]) -> None:
    """The recording's header, read without decoding a sample: ValueError saying what is
    wrong with it (`span`: the shortest and longest recording taken, in seconds)."""
    if is_mp3(audio):
        with _mp3(audio) as (rate, channels, seconds, _):
            _check(rate, channels, seconds, span)
        return
    try:
        with sf.SoundFile(io.BytesIO(audio)) as f:
            _check(f.samplerate, f.channels, f.frames / f.samplerate, span)
    except (sf.LibsndfileError, RuntimeError, TypeError, ZeroDivisionError) as exc:
        raise ValueError(f"{_UNREADABLE}: {exc}") from None


def decode(audio: bytes, span: tuple[float, float]) -> tuple[np.ndarray, int]:
    """The recording as mono float samples and its rate. Its header is checked before any
    sample is decoded, and samples are read a block at a time into mono, so memory stays
    bounded whatever the file claims."""
    if is_mp3(audio):
        with _mp3(audio) as (rate, channels, seconds, blocks):
            _check(rate, channels, seconds, span)
            return _mono(blocks, rate, span[1]), rate
    try:
        with sf.SoundFile(io.BytesIO(audio)) as f:
            _check(f.samplerate, f.channels, f.frames / f.samplerate, span)
            blocks = f.blocks(blocksize=f.samplerate, dtype="float32", always_2d=True)
            return _mono((block.T for block in blocks), f.samplerate, span[1]), f.samplerate
    except (sf.LibsndfileError, RuntimeError, TypeError, ZeroDivisionError) as exc:
        raise ValueError(f"{_UNREADABLE}: {exc}") from None


def _check(rate: int, channels: int, seconds: float, span: tuple[float, float]) -> None:
    if channels > MAX_RECORDING_CHANNELS:
        raise ValueError(f"{channels} channels: send mono or stereo")
    if not RECORDING_RATES[0] <= rate <= RECORDING_RATES[1]:
        raise ValueError(
            f"a sample rate of {rate} Hz: {RECORDING_RATES[0]}-{RECORDING_RATES[1]} Hz needed"
        )
    if not span[0] <= seconds <= span[1]:
        raise ValueError(f"the recording lasts {seconds:.1f} s: {span[0]:g}-{span[1]:g} s needed")


def _mono(blocks: Iterator[np.ndarray], rate: int, longest: float) -> np.ndarray:
    """Blocks of (channels, samples) averaged to mono, refused past the longest recording
    (more samples than its header said)."""
    limit, read, pieces = int(longest * rate), 0, []
    for block in blocks:
        read += block.shape[1]
        if read > limit:
            raise ValueError(f"the recording lasts over {longest:g} s")
        pieces.append(block.mean(axis=0, dtype=np.float32))
    return np.concatenate(pieces) if pieces else np.zeros(0, np.float32)


def _planar(frame: Any) -> np.ndarray:
    """A decoded frame as float32 (channels, samples)."""
    samples = frame.to_ndarray()
    if samples.dtype.kind == "i":  # a decoder of integer samples
        samples = samples / float(np.iinfo(samples.dtype).max + 1)
    if not frame.format.is_planar:  # interleaved: (1, samples x channels)
        samples = samples.reshape(-1, len(frame.layout.channels)).T
    return np.asarray(samples, dtype=np.float32)


class _mp3:
    """An MP3 opened by FFmpeg: (rate, channels, seconds from its header, its blocks)."""

    def __init__(self, audio: bytes) -> None:
        self._audio = audio
        self._container: Any = None

    def __enter__(self) -> tuple[int, int, float, Iterator[np.ndarray]]:
        av = load_av()
        try:
            self._container = av.open(io.BytesIO(self._audio), format="mp3")
            stream = self._container.streams.audio[0]
        except (av.FFmpegError, IndexError) as exc:
            raise ValueError(f"{_UNREADABLE}: {exc}") from None
        rate, channels = stream.codec_context.sample_rate, stream.codec_context.channels
        duration = self._container.duration  # microseconds, from the header or the bit rate
        seconds = duration / 1e6 if duration else 0.0
        return rate, channels, seconds, self._blocks(stream)

    def _blocks(self, stream: Any) -> Iterator[np.ndarray]:
        """Its frames; a bad frame is skipped as players do, a file of many is refused."""
        av, bad = load_av(), 0
        for packet in self._container.demux(stream):
            try:
                frames = stream.codec_context.decode(packet)
            except av.FFmpegError as exc:
                bad += 1
                if bad > MAX_BAD_FRAMES:
                    raise ValueError(f"{_UNREADABLE}: {exc} ({bad} damaged frames)") from None
                continue
            for frame in frames:
                yield _planar(frame)

    def __exit__(self, *exc: object) -> None:
        if self._container is not None:
            self._container.close()
