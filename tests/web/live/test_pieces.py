"""AlignedPieces: each character of a segment handed out once, in order, inside its piece."""

from __future__ import annotations

from web.live.pieces import BYTES_PER_MS, AlignedPieces

TEXT = "Hello there, my friend."


def pcm(ms: float) -> bytes:
    return bytes(int(ms * BYTES_PER_MS) // 2 * 2)


def test_characters_follow_the_audio() -> None:
    pieces = AlignedPieces(3, TEXT, start_ms=1000.0, speed=1.0)
    out = [pieces.next(pcm(300)) for _ in range(10)]  # 3 s: longer than the estimate
    assert [p.segment for p in out] == [3] * 10 and out[0].start_ms == 1000.0
    assert "".join(c for p in out for c in p.chars) == TEXT
    assert pieces.rest() is None
    for piece in out:
        for start in piece.char_start_ms:
            assert piece.start_ms <= start <= piece.start_ms + piece.duration_ms
    spoken = pieces.spoken()
    assert (spoken.start_ms, spoken.end_ms) == (1000.0, 4000.0)
    assert [w for w, _, _ in spoken.words] == ["Hello", "there,", "my", "friend."]


def test_what_the_audio_did_not_reach_comes_last() -> None:
    pieces = AlignedPieces(1, TEXT, start_ms=0.0, speed=1.0)
    first = pieces.next(pcm(200))  # far shorter than the estimate
    rest = pieces.rest()
    assert rest is not None and rest.pcm == b"" and rest.duration_ms == 0
    assert "".join(first.chars + rest.chars) == TEXT
    assert set(rest.char_start_ms) == {200.0}
