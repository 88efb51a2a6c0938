"""pocketsphinx (its English model is inside its wheel: no download, a CPU): the text a segment
should say is aligned to its audio, and each word's acoustic score per frame says whether the
audio confirms it. Free decoding by so small a model is far worse than the speech it would check;
alignment against the known text is not (bench/checks.py measured both).

The decoder holds the GIL for the whole of a segment (200 ms of a stalled event loop on a long
one), so it runs in a child process of its own, spoken to over a pipe: `python -m` this module.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import signal
import sys
from typing import Any

import numpy as np
import orjson

from workers.checks.recognizers.base import Heard, Unheard
from workers.checks.words import Slot

# A word whose acoustic score is below this per 10 ms frame (natural log, against the best
# senone of each frame: pocketsphinx normalizes its scores so) is one the audio did not confirm.
DOUBT_PER_FRAME = -6.0
# Words missing from the dictionary cannot be aligned: past this share the segment is unheard.
UNKNOWN_SHARE = 1 / 3
_FILLERS = ("<s>", "</s>", "<sil>")
_PAD_S = 0.25
# Speech the text does not account for: a 10 ms frame louder than this share of the segment's
# loud frames (their 90th percentile RMS), where the alignment put silence.
_LOUD_SHARE = 0.1
_ANY = "anyword"  # a word of its model's spoken-noise phone (+SPN+): any word
# Abbreviations its dictionary lacks, as eSpeak NG and people read them.
_EXTRA_WORDS = {"prof": "P R AA F", _ANY: "+SPN+"}


class Pocketsphinx:
    name = "pocketsphinx"
    # Alignment doubts a lone short word now and then (eSpeak NG's "and", "it"): two in a row,
    # or a third of the words, fail a segment.
    fail_run = 2
    max_error_rate = 0.34
    max_extra_s = 0.6
    calibrated = True

    def __init__(self, timeout_s: float, processes: int = 1) -> None:
        """`processes`: children hearing segments side by side (each about one core's worth)."""
        self.timeout_s = timeout_s
        self._children = [_Child() for _ in range(max(1, processes))]
        self._idle: asyncio.Queue[_Child] = asyncio.Queue()
        for child in self._children:
            self._idle.put_nowait(child)

    def covers(self, language: str) -> bool:
        return language == "en"

    async def start(self) -> None:
        """Start the children now (a second of imports), not on the first segment."""
        for child in self._children:
            await child.started()

    async def hear(
        self, samples: np.ndarray, rate: int, expected: list[Slot], language: str
    ) -> Heard:
        # A quarter second of silence after it: a segment that ends on its last sound leaves the
        # aligner no frames to finish the text's last word in ("… expected it.").
        padded = np.concatenate([samples, np.zeros(int(rate * _PAD_S), np.float32)])
        pcm = (np.clip(np.nan_to_num(padded), -1.0, 1.0) * 32767).astype("<i2").tobytes()
        header = orjson.dumps({"rate": rate, "slots": expected, "bytes": len(pcm)}) + b"\n"
        try:
            async with asyncio.timeout(self.timeout_s):
                child = await self._idle.get()
                try:
                    line = await child.ask(header + pcm)
                finally:
                    self._idle.put_nowait(child)
        except TimeoutError:
            raise Unheard(f"pocketsphinx took more than {self.timeout_s:g} s") from None
        except (OSError, ValueError) as exc:
            raise Unheard(f"pocketsphinx is down: {exc}") from None
        if not line:
            raise Unheard("pocketsphinx is down: its process ended")
        answer = orjson.loads(line)
        if "error" in answer:
            raise Unheard(answer["error"])
        return Heard(
            words=answer["words"],
            doubtful=answer.get("doubtful"),
            aligned=answer["aligned"],
            extra_s=answer.get("extra_s", 0.0),
        )

    async def close(self) -> None:
        for child in self._children:
            await child.kill()


class _Child:
    """One child process, asked one segment at a time over its pipes."""

    def __init__(self) -> None:
        self.process: asyncio.subprocess.Process | None = None

    async def ask(self, request: bytes) -> bytes:
        """Its answer line to `request` (b"": it ended). Cut short (a timeout), it is killed:
        its pipes are out of step."""
        process = await self.started()
        assert process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write(request)
            await process.stdin.drain()
            line = await process.stdout.readline()
        except BaseException:
            await self.kill()
            raise
        if not line:
            await self.kill()
        return line

    async def started(self) -> asyncio.subprocess.Process:
        process = self.process
        if process is None or process.returncode is not None:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                __name__,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                limit=1 << 20,
            )
            self.process = process
        return process

    async def kill(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()


def _decoder(rate: int) -> Any:
    from pocketsphinx import Decoder

    window = 0.025625 * rate  # pocketsphinx's analysis window, in samples
    nfft = 1 << math.ceil(math.log2(window))
    decoder = Decoder(samprate=rate, nfft=nfft, lm=None, loglevel="FATAL")
    for word, phones in _EXTRA_WORDS.items():
        decoder.add_word(word, phones, True)
    return decoder


def align(decoder: Any, pcm: bytes, rate: int, slots: list[list[list[str]]]) -> dict[str, Any]:
    """The words the audio in `pcm` follows through `slots` (each a choice of readings), which of
    them it does not confirm, and the seconds of speech it put in no word (in the child). A
    grammar of the text, not free decoding: the audio must say these words in this order, each a
    reading the text allows. A word the dictionary lacks (a rare name) is any speech there:
    pocketsphinx's spoken-noise model."""
    missing: list[str] = []
    grammar: list[list[list[str]]] = []
    for slot in slots:
        readings = [[_spelled(decoder, w) for w in r] for r in slot]
        if all(_ANY in reading for reading in readings):
            missing.append(slot[0][0])
        grammar.append([r for i, r in enumerate(readings) if r not in readings[:i]])
    if not slots or len(missing) > UNKNOWN_SHARE * len(slots):
        return {"error": f"words pocketsphinx's dictionary lacks: {' '.join(missing[:5])}"}
    rule = " ".join(_choice(slot) for slot in grammar)
    jsgf = f"#JSGF V1.0;\ngrammar segment;\npublic <segment> = {rule};\n"
    decoder.add_jsgf_string("segment", jsgf)
    decoder.activate_search("segment")
    decoder.start_utt()
    decoder.process_raw(pcm, full_utt=True)
    decoder.end_utt()
    if decoder.hyp() is None:
        words = [w for slot in grammar for w in slot[0] if w != _ANY]
        return {"aligned": False, "words": words, "doubtful": [True] * len(words)}
    logmath = decoder.get_logmath()
    words, doubtful, followed = [], [], []
    loud, extra = _loud_frames(pcm, rate), 0
    for seg in decoder.seg():
        if seg.word in _FILLERS or seg.word.startswith(("+", "[")):
            extra += int(loud[seg.start_frame : seg.end_frame + 1].sum())
            continue
        followed.append(seg.word.split("(")[0])
        if seg.word == _ANY:
            continue
        frames = seg.end_frame - seg.start_frame + 1
        score = logmath.log_to_ln(logmath.log(seg.ascore)) if seg.ascore > 0 else -math.inf
        words.append(followed[-1])
        doubtful.append(score / max(1, frames) < DOUBT_PER_FRAME)
    # A path that ended short of the grammar's end (pocketsphinx's best partial one) followed
    # only the start of the text: the words it did not reach were not heard as said.
    missed = [w for w in _unreached(grammar, followed) if w != _ANY]
    words += missed
    doubtful += [True] * len(missed)
    return {"aligned": True, "words": words, "doubtful": doubtful, "extra_s": extra / 100}


def _unreached(grammar: list[list[list[str]]], followed: list[str]) -> list[str]:
    """The words of the slots `followed` (the path's words, in order) did not get to."""
    at = 0
    for index, slot in enumerate(grammar):
        longest_first = sorted(slot, key=len, reverse=True)
        reading = next((r for r in longest_first if followed[at : at + len(r)] == r), None)
        if reading is None:
            return [word for rest in grammar[index:] for word in rest[0]]
        at += len(reading)
    return []


def _spelled(decoder: Any, word: str) -> str:
    """`word` as the dictionary spells it: the normalizer drops apostrophes ("oclock", "dont"),
    the dictionary keeps them ("o'clock"); a word it lacks either way is any speech (_ANY)."""
    if decoder.lookup_word(word) is not None:
        return word
    for cut in range(1, len(word)):
        spelled = f"{word[:cut]}'{word[cut:]}"
        if decoder.lookup_word(spelled) is not None:
            return spelled
    return _ANY


def _loud_frames(pcm: bytes, rate: int) -> np.ndarray:
    """Which of its 10 ms frames (pocketsphinx's) are speech rather than a pause."""
    samples = np.frombuffer(pcm, "<i2").astype(np.float32)
    size = max(1, rate // 100)
    count = samples.size // size
    frames = samples[: count * size].reshape(count, size)
    rms = np.sqrt(np.mean(frames * frames, axis=1))
    loud: np.ndarray = rms > _LOUD_SHARE * float(np.percentile(rms, 90)) if count else rms > 0
    return loud


def _choice(slot: list[list[str]]) -> str:
    readings = [" ".join(reading) for reading in slot]
    return readings[0] if len(readings) == 1 else f"( {' | '.join(readings)} )"


def serve() -> None:
    """The child: a header line and its PCM in, one answer line out, until stdin ends (its
    worker closed it, or died). A terminal's Ctrl-C, sent to the whole process group, is its
    worker's to act on: the worker stops it when it stops."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    decoders: dict[int, Any] = {}
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while header := stdin.readline():
        request = orjson.loads(header)
        pcm = stdin.read(request["bytes"])
        try:
            rate = int(request["rate"])
            decoder = decoders.get(rate) or decoders.setdefault(rate, _decoder(rate))
            answer = align(decoder, pcm, rate, request["slots"])
        except Exception as exc:  # told to the worker as unheard; the child goes on
            answer = {"error": f"pocketsphinx failed: {exc}"}
        stdout.write(orjson.dumps(answer) + b"\n")
        stdout.flush()


if __name__ == "__main__":
    serve()
