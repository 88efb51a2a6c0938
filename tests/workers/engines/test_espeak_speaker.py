"""eSpeak NG's speaking process: each segment from the same memory (the same bytes whatever came
before, in any process), an unknown voice refused in words, a killed process started again."""

from __future__ import annotations

import os
import signal

import pytest

from workers.engines.espeak_speaker import Speaker, SpeakerError

TEXT = "The quick brown fox jumps over the lazy dog, seven times."


@pytest.fixture
def speaker() -> Speaker:
    speaker = Speaker()
    speaker.start()
    return speaker


def test_the_same_request_is_the_same_bytes_whatever_came_before(speaker: Speaker) -> None:
    first, words = speaker.speak(b"en-us+f3", 175, 55, TEXT)
    assert len(first) > speaker.native_rate and [at for at, _ in words][:3] == [1, 5, 11]
    speaker.speak(b"cmn+m1", 200, 35, "你好，世界。")
    speaker.speak(b"en+m1", 120, 35, "Something else entirely.")
    assert speaker.speak(b"en-us+f3", 175, 55, TEXT) == (first, words)
    other = Speaker()  # another process, started later
    assert other.speak(b"en-us+f3", 175, 55, TEXT) == (first, words)


def test_an_unknown_voice_is_refused_and_the_next_spoken(speaker: Speaker) -> None:
    with pytest.raises(SpeakerError, match="no voice 'xx-nothing'") as refused:
        speaker.speak(b"xx-nothing", 175, 50, TEXT)
    assert not refused.value.died
    pcm, _ = speaker.speak(b"en-us+m3", 175, 45, "Still here.")
    assert len(pcm) > speaker.native_rate // 4


def test_a_killed_process_is_started_again(speaker: Speaker) -> None:
    before, _ = speaker.speak(b"en-us+f3", 175, 55, TEXT)
    process = speaker._process
    assert process is not None
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    after, _ = speaker.speak(b"en-us+f3", 175, 55, TEXT)
    assert after == before and speaker._process is not process
