"""Cheap checks on a segment's samples, always on: not a number, clipped, too quiet, buried in
noise, too short or too long for its text, a long silence inside it, the same stretch of sound
repeated (a loop)."""

from __future__ import annotations

import re

import numpy as np

from core.audio import sizes

FRAME_S = 0.02  # the checks' frame: 20 ms
# A sample this close to full scale is clipped; a segment with more than this share of them is.
CLIP_LEVEL = 0.999
CLIPPED_SHARE = 0.002
# Speech takes at least this share of what `sizes.speech_seconds` expects (which errs long: eSpeak
# NG took 0.45-0.94 of it over bench.checks' corpus), and
# at most this many times it plus a second: a run-on fills its engine's token budget far past it.
SHORT_SHARE = 0.25
LONG_TIMES = 1.8
LONG_PLUS_S = 1.0
# Silence inside speech: frames this far below the segment's loud frames (a ratio of their RMS),
# for longer than this.
SILENT_RATIO = 0.02
SILENCE_S = 2.0
# Too quiet to use: its loud frames (the 90th percentile of the frames' RMS) below this, in dB
# of full scale. Speech comes out of the engines at -15 to -19 (eSpeak NG's English voices over
# bench.checks' corpus); the same at -50 dB is far below it.
QUIET_DBFS = -40.0
# Buried in noise: its loud frames less than this far above its quietest (the 2nd percentile),
# in dB. Clean speech has pauses or closures far below its loud frames (14.8 dB at least over
# that corpus, 15-22 dB at its 1st percentile), speech under noise of its own power does not (7.1
# at most), nor noise alone.
NOISY_DB = 10.0
# A loop: the same sound again after a lag of LOOP_MIN_S..LOOP_MAX_S, for LOOP_S of sound and
# two lags' worth (a frame's spectrum this close to the one a lag before, as a share of its norm).
LOOP_MIN_S = 0.2
LOOP_MAX_S = 2.0
LOOP_S = 1.0
LOOP_DISTANCE = 0.12
_BANDS = 24
_SPOKEN = re.compile(r"\w")


def expected_seconds(text: str, speed: float = 1.0) -> float:
    """Seconds `text` should take at `speed` (erring long)."""
    return sizes.speech_seconds(text) / max(speed, 0.1)


def signal_faults(
    samples: np.ndarray, rate: int, text: str, speed: float = 1.0, truncated: bool = False
) -> list[str]:
    """Why the audio cannot be `text` spoken well ([] when nothing is wrong): each a reason
    (`not_finite`, `clipped`, `ran_to_budget`, `quiet`, `noisy`, `too_short`, `too_long`,
    `silence`, `loop`)."""
    if samples.size and not np.isfinite(samples).all():
        return ["not_finite"]
    faults = []
    if truncated:
        faults.append("ran_to_budget")
    clipped = np.count_nonzero(np.abs(samples) >= CLIP_LEVEL)
    if samples.size and clipped > CLIPPED_SHARE * samples.size:
        faults.append("clipped")
    seconds = samples.size / rate
    expected = expected_seconds(text, speed)
    if _SPOKEN.search(text) and seconds < SHORT_SHARE * expected:
        faults.append("too_short")
    elif seconds > LONG_TIMES * expected + LONG_PLUS_S:
        faults.append("too_long")
    frames = _frames(samples, rate)
    if frames.shape[0]:
        faults += _level_faults(frames)
        loud = _loudness(frames)
        if _longest_inner_silence(loud) * FRAME_S > SILENCE_S:
            faults.append("silence")
        if _loops(frames, loud):
            faults.append("loop")
    return faults


def _frames(samples: np.ndarray, rate: int) -> np.ndarray:
    size = max(1, int(rate * FRAME_S))
    count = samples.size // size
    return samples[: count * size].reshape(count, size).astype(np.float32, copy=False)


def _level_faults(frames: np.ndarray) -> list[str]:
    """`quiet` when its loud frames are too quiet to use, else `noisy` when its quietest are
    not far enough below them (noise under the speech, or noise alone)."""
    rms = np.sqrt(np.mean(frames * frames, axis=1)) + 1e-7
    loud, quietest = np.percentile(rms, [90, 2])
    if 20 * np.log10(loud) < QUIET_DBFS:
        return ["quiet"]
    if 20 * np.log10(loud / quietest) < NOISY_DB:
        return ["noisy"]
    return []


def _loudness(frames: np.ndarray) -> np.ndarray:
    """Each frame is sound (True) or silence, against the segment's loud frames."""
    rms = np.sqrt(np.mean(frames * frames, axis=1))
    reference = float(np.percentile(rms, 90)) if rms.size else 0.0
    loud: np.ndarray = rms > max(1e-4, SILENT_RATIO * reference)
    return loud


def _longest_inner_silence(loud: np.ndarray) -> int:
    """Frames of the longest silence between the first and the last sound."""
    where = np.flatnonzero(loud)
    if where.size < 2:
        return 0
    return int(np.max(np.diff(where)) - 1)


def _loops(frames: np.ndarray, loud: np.ndarray) -> bool:
    """The same sound again a lag later, for long enough (silence against silence not counted)."""
    spectra = np.log1p(np.abs(np.fft.rfft(frames, axis=1)))
    edges = np.linspace(0, spectra.shape[1], _BANDS + 1).astype(int)
    bands = np.add.reduceat(spectra, edges[:-1], axis=1)
    norms = np.linalg.norm(bands, axis=1) + 1e-9
    low, high = int(LOOP_MIN_S / FRAME_S), int(LOOP_MAX_S / FRAME_S)
    need_s = LOOP_S / FRAME_S
    for lag in range(low, min(high, bands.shape[0] // 2) + 1):
        distance = np.linalg.norm(bands[lag:] - bands[:-lag], axis=1) / norms[lag:]
        now, before = loud[lag:], loud[:-lag]
        same = (distance < LOOP_DISTANCE) & now & before
        # A pause repeated with the sound around it is silence against silence: it neither
        # breaks a run nor counts toward it.
        run, matched = _longest_run(same | (~now & ~before), same)
        if matched >= need_s and run >= 2 * lag:
            return True
    return False


def _longest_run(flags: np.ndarray, counted: np.ndarray) -> tuple[int, int]:
    """The run of True in `flags` with the most True of `counted` in it: its length and that
    count."""
    if not flags.any():
        return 0, 0
    changes = np.flatnonzero(np.diff(np.concatenate(([0], flags.astype(np.int8), [0]))))
    starts, ends = changes[::2], changes[1::2]
    sums = np.concatenate(([0], np.cumsum(counted)))
    counts = sums[ends] - sums[starts]
    best = int(np.argmax(counts))
    return int(ends[best] - starts[best]), int(counts[best])
