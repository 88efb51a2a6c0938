"""Derived files are built on threads of their own, a bounded number at once per process: builds
from many addresses neither stall the store's reads nor pile up without end."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from core.audio_store.filesystem import FileStore
from web.derived import BUILDS_HELD, DerivedFiles
from web.errors import ApiError


async def test_builds_do_not_take_the_stores_threads(tmp_path: Path) -> None:
    store = FileStore(str(tmp_path))
    await store.put("audio/honest.wav", b"x" * 1024)
    derived = DerivedFiles(1 << 20)
    release = threading.Event()

    def slow_build() -> bytes:  # a long document's subtitles, say
        release.wait(10)
        return b"built"

    builds = [
        asyncio.create_task(derived.get(("job", n), slow_build, f"203.0.113.{n}"))
        for n in range(BUILDS_HELD)
    ]
    await asyncio.sleep(0.1)
    try:
        started = time.monotonic()
        assert await store.get("audio/honest.wav") == b"x" * 1024
        assert time.monotonic() - started < 0.5  # not behind the builds
        with pytest.raises(ApiError) as refused:  # one build more than a process holds
            await derived.get(("job", "more"), slow_build, "198.51.100.1")
        assert refused.value.status == 503 and refused.value.code == "busy"
    finally:
        release.set()
        assert [await build for build in builds] == [b"built"] * BUILDS_HELD
        derived.close()
        await store.aclose()
