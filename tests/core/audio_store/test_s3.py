"""The S3 audio store against a real S3-compatible server process: objects by key under a
prefix, server-side copies, listing, presigned URLs with Range, and a dead server as a
retryable StoreError within a bounded time."""

from __future__ import annotations

import time
from pathlib import Path

import aiohttp
import pytest

from core.audio_store.base import StoreError
from core.audio_store.s3 import S3Store, parse_s3_url
from core.audio_store.urls import open_store
from testing.s3_server import S3Server


async def test_put_get_copy_delete_list_under_its_prefix(s3_store_url: str) -> None:
    store = open_store(s3_store_url)
    assert isinstance(store, S3Store)
    other = S3Store(s3_store_url.replace("/audio?", "/elsewhere?"))
    try:
        await store.put("tts-main/jobs/abc/1.wav", b"RIFF data")
        await other.put("tts-main/jobs/abc/9.wav", b"not ours")
        assert await store.get("tts-main/jobs/abc/1.wav") == b"RIFF data"
        assert await store.get("tts-main/jobs/abc/2.wav") is None
        assert await store.copy("tts-main/jobs/abc/1.wav", "tts-main/cache/d1/3.wav")
        assert not await store.copy("tts-main/jobs/gone/1.wav", "tts-main/cache/d1/4.wav")
        listed = {key: written async for key, written in store.listing()}
        assert set(listed) == {"tts-main/jobs/abc/1.wav", "tts-main/cache/d1/3.wav"}
        assert all(abs(written - time.time()) < 120 for written in listed.values())
        await store.delete("tts-main/jobs/abc/1.wav")
        await store.delete("tts-main/jobs/abc/1.wav")  # gone already: nothing happens
        assert await store.get("tts-main/cache/d1/3.wav") == b"RIFF data"  # the copy lives on
        assert await store.free_bytes() is None
        with pytest.raises(ValueError, match="not an audio store key"):
            await store.put("../escape", b"x")
    finally:
        await store.aclose()
        await other.aclose()


async def test_a_presigned_url_serves_the_object_with_range_and_etag(s3_store_url: str) -> None:
    store = S3Store(s3_store_url)
    try:
        data = bytes(range(256)) * 40
        await store.put("tts-main/jobs/abc/1.mp3", data)
        url = await store.presign(
            "tts-main/jobs/abc/1.mp3", 60, "audio/mpeg", 'attachment; filename="tts-abc.mp3"'
        )
        assert url is not None and "X-Amz-Signature" in url
        async with aiohttp.ClientSession() as http:
            async with http.get(url) as whole:
                assert whole.status == 200 and await whole.read() == data
                assert whole.headers["Content-Type"] == "audio/mpeg"
                assert whole.headers["Content-Disposition"].startswith("attachment")
                etag = whole.headers["ETag"]
            async with http.get(url, headers={"Range": "bytes=100-199"}) as part:
                assert part.status == 206 and await part.read() == data[100:200]
            async with http.get(url, headers={"If-None-Match": etag}) as again:
                assert again.status == 304
    finally:
        await store.aclose()


async def test_a_dead_server_is_a_store_error_soon(tmp_path: Path) -> None:
    server = S3Server(tmp_path / "s3.log").start()
    await server.create_bucket("doomed")
    store = S3Store(server.url("doomed"))
    try:
        await store.put("tts-main/jobs/abc/1.wav", b"RIFF")
        server.stop()
        started = time.monotonic()
        for call in (
            store.put("tts-main/jobs/abc/2.wav", b"RIFF"),
            store.get("tts-main/jobs/abc/1.wav"),
            store.copy("tts-main/jobs/abc/1.wav", "tts-main/cache/d/1.wav"),
        ):
            with pytest.raises(StoreError, match="S3 could not"):
                await call
        assert time.monotonic() - started < 30
        server.start()  # back, empty (this server keeps objects in memory): refused, not hung
        with pytest.raises(StoreError, match="NoSuchBucket"):
            await store.put("tts-main/jobs/abc/3.wav", b"RIFF")
    finally:
        await store.aclose()
        server.stop()


def test_urls_name_a_bucket_and_known_options() -> None:
    assert parse_s3_url("s3://b/p/q?region=eu-west-1") == {
        "bucket": "b",
        "prefix": "p/q",
        "region": "eu-west-1",
    }
    for bad, message in (
        ("s3:///prefix", "names a bucket"),
        ("s3://b/p?endpont=http://x", "unknown option 'endpont'"),
        ("s3://b/p?addressing=dns", "path or virtual"),
    ):
        with pytest.raises(ValueError, match=message):
            open_store(bad)
