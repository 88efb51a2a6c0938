"""The audio store a setting names (`CHATTTS_AUDIO_STORE`)."""

from __future__ import annotations

from urllib.parse import urlsplit

from core.audio_store.base import AudioStore
from core.audio_store.filesystem import FileStore


def open_store(url: str) -> AudioStore | None:
    """The store `url` names; None for "" or "redis" (audio stays in Redis)."""
    if url in ("", "redis"):
        return None
    parts = urlsplit(url)
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            raise ValueError(f"CHATTTS_AUDIO_STORE={url!r}: a file URL names an absolute path")
        return FileStore(parts.path)
    raise ValueError(
        f"CHATTTS_AUDIO_STORE={url!r}: unsupported; use file:///path (a local or shared "
        "directory), or redis to keep audio in Redis"
    )
