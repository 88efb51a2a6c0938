"""The filesystem audio store on a real directory: atomic writes, copies, keys that cannot
escape the store, and a full disk that becomes a retryable StoreError."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.audio_store.base import StoreError, valid_key
from core.audio_store.filesystem import FileStore
from core.audio_store.urls import open_store


async def test_put_get_copy_delete_and_list(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}")
    assert isinstance(store, FileStore)
    await store.put("tts-main/jobs/abc/1.wav", b"RIFF data")
    assert await store.get("tts-main/jobs/abc/1.wav") == b"RIFF data"
    assert await store.get("tts-main/jobs/abc/2.wav") is None
    assert await store.copy("tts-main/jobs/abc/1.wav", "tts-main/cache/d1/3.wav")
    assert not await store.copy("tts-main/jobs/gone/1.wav", "tts-main/cache/d1/4.wav")
    copy = tmp_path / "tts-main/cache/d1/3.wav"
    assert copy.read_bytes() == b"RIFF data"
    assert copy.stat().st_ino == (tmp_path / "tts-main/jobs/abc/1.wav").stat().st_ino  # a link
    listed = {key async for key, _ in store.listing()}
    assert listed == {"tts-main/jobs/abc/1.wav", "tts-main/cache/d1/3.wav"}
    await store.delete("tts-main/jobs/abc/1.wav")
    await store.delete("tts-main/jobs/abc/1.wav")  # gone already: nothing happens
    assert await store.get("tts-main/cache/d1/3.wav") == b"RIFF data"  # the copy lives on


async def test_a_write_is_whole_or_absent(tmp_path: Path) -> None:
    store = FileStore(str(tmp_path))
    await store.put("q/jobs/j/1.mp3", b"old")
    await store.put("q/jobs/j/1.mp3", b"new" * 1000)
    assert await store.get("q/jobs/j/1.mp3") == b"new" * 1000
    assert [p.name for p in (tmp_path / "q/jobs/j").iterdir()] == ["1.mp3"]  # no temporaries


@pytest.mark.parametrize(
    "key", ["../etc/passwd", "q/../../x", "/abs/path", "q", "q/jobs/j/1.wav\n", "q/j b/1"]
)
def test_keys_cannot_leave_the_store(key: str) -> None:
    with pytest.raises(ValueError, match="not an audio store key"):
        valid_key(key)


async def test_a_store_that_cannot_write_raises_store_error(tmp_path: Path) -> None:
    # A root that is a file, not a directory: nothing can be written, whoever runs the test.
    (tmp_path / "file").write_bytes(b"")
    store = FileStore(str(tmp_path / "file"))
    with pytest.raises(StoreError):
        await store.put("q/jobs/j/1.wav", b"x")


def test_urls_say_what_is_supported(tmp_path: Path) -> None:
    assert open_store("") is None and open_store("redis") is None
    with pytest.raises(ValueError, match="file:///path"):
        open_store("s4://bucket")
    with pytest.raises(ValueError, match="absolute path"):
        open_store("file://host/path")
