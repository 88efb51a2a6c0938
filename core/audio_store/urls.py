"""The audio store a setting names (`CHATTTS_AUDIO_STORE`)."""

from __future__ import annotations

from urllib.parse import urlsplit

from core.audio_store.base import AudioStore
from core.audio_store.filesystem import FileStore
from core.audio_store.s3 import S3Store


def open_store(url: str, timeout_s: float = 30.0) -> AudioStore | None:
    """The store `url` names; None for "" or "redis" (audio stays in Redis). A network store
    gives up on one call within about `timeout_s`."""
    if url in ("", "redis"):
        return None
    parts = urlsplit(url)
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            raise ValueError(f"CHATTTS_AUDIO_STORE={url!r}: a file URL names an absolute path")
        return FileStore(parts.path)
    if parts.scheme == "s3":
        return S3Store(url, timeout_s)
    raise ValueError(
        f"CHATTTS_AUDIO_STORE={url!r}: unsupported; use file:///path (a local or shared "
        "directory), s3://bucket/prefix (S3 or a compatible store), or redis to keep audio in Redis"
    )
