"""Subtitle cues against the conventions (two lines of 42, 7 s at most), on real eSpeak NG audio:
one cue per segment (the cues before) against core/text/cues.py, with its word times and without
(the estimate ChatTTS gets), on English and Mandarin documents.

    python -m bench.subtitles

Prints, per text and way of cutting: cues, the longest line and cue, the share of cues past the
conventions, and how far the estimated cue starts fall from the heard ones (median, p90, max).
"""

from __future__ import annotations

import statistics

from bench.lib import cli
from core.audio.formats import SAMPLE_RATE, SEGMENT_GAP_S
from core.infra.settings import Settings
from core.queue.job import SynthesisRequest
from core.text.cues import (
    MAX_CUE_S,
    MAX_LINES,
    Cue,
    PlacedSegment,
    align_words,
    cues_of,
    line_width,
    shown,
)
from workers.engines.base import Segment
from workers.engines.espeak import EspeakEngine

ENGLISH = " ".join(
    [
        "The service takes text over HTTP and answers at once, while workers synthesize it.",
        "Short sentences are merged. Like this one. And this.",
        "A long sentence, with clauses that run on and on, is cut where a reader pauses, at "
        "a comma or a colon, and never in the middle of a word, however long it grows.",
        "Numbers such as 1204 are spoken, [uv_break] and pauses are heard.",
    ]
    * 6
)
MANDARIN = (
    "大家早上好，今天我们来谈一谈语音合成的技术，以及它在生活中的各种应用。这很有意思！"
    "语音合成可以把文字变成声音，帮助看不见屏幕的人，也可以给视频配音。"
) * 6


def placed(engine: EspeakEngine, text: str, voice: str) -> list[PlacedSegment]:
    request = SynthesisRequest(text=text, voice=voice)
    segments, at = [], 0.0
    for index, (piece, begin, end) in enumerate(engine.pieces(text, request)):
        segment = Segment("bench", index, piece, request)
        samples = engine.synthesize([segment])[0]
        at += SEGMENT_GAP_S if index else 0.0
        words = align_words(piece, text, (begin, end), segment.words)
        timed = tuple((c, at + s / SAMPLE_RATE) for c, s in words)
        segments.append(PlacedSegment(at, at + samples.size / SAMPLE_RATE, begin, end, timed))
        at += samples.size / SAMPLE_RATE
    return segments


def per_segment(text: str, segments: list[PlacedSegment]) -> list[Cue]:
    return [Cue(s.start, s.end, s.begin, s.stop, shown(text[s.begin : s.stop])) for s in segments]


def describe(name: str, cues: list[Cue]) -> None:
    lines = [line for cue in cues for line in cue.text.split("\n")]
    past = sum(
        1
        for cue in cues
        if cue.end - cue.start > MAX_CUE_S
        or len(cue.text.split("\n")) > MAX_LINES
        or any(len(line) > line_width(cue.text) for line in cue.text.split("\n"))
    )
    longest = max(cue.end - cue.start for cue in cues)
    print(
        f"  {name:<28} {len(cues):>4} cues  longest line {max(map(len, lines)):>3} chars  "
        f"longest cue {longest:5.2f} s  past the conventions {past / len(cues):6.1%}"
    )


def main() -> None:
    cli.parser("bench.subtitles", __doc__).parse_args()
    engine = EspeakEngine(Settings())
    engine.load()
    for label, text, voice in (
        ("English", ENGLISH, "en_male"),
        ("Mandarin", MANDARIN, "zh_female"),
    ):
        segments = placed(engine, text, voice)
        heard = cues_of(text, segments)
        estimated = cues_of(
            text, [PlacedSegment(s.start, s.end, s.begin, s.stop) for s in segments]
        )
        print(
            f"{label}: {len(text)} characters, {len(segments)} segments, "
            f"{segments[-1].end:.1f} s of audio"
        )
        describe("one cue per segment", per_segment(text, segments))
        describe("cues, eSpeak's word times", heard)
        describe("cues, estimated (ChatTTS)", estimated)
        starts = {c.begin: c.start for c in heard}
        errors = sorted(abs(c.start - starts[c.begin]) for c in estimated if c.begin in starts)
        if errors:
            p90 = errors[int(0.9 * (len(errors) - 1))]
            print(
                f"  estimated starts against heard ones ({len(errors)} shared cuts): median "
                f"{statistics.median(errors) * 1000:.0f} ms, p90 {p90 * 1000:.0f} ms, "
                f"max {errors[-1] * 1000:.0f} ms"
            )


if __name__ == "__main__":
    main()
