"""What an audio store provides: objects by key, and the errors it raises."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Protocol

# Keys are ours (queue, job id or digest, a random suffix): anything else is refused, so that a
# key can never name a path outside the store.
_KEY = re.compile(r"[A-Za-z0-9_-]{1,64}(/[A-Za-z0-9_.-]{1,128}){1,4}")


def valid_key(key: str) -> str:
    if not _KEY.fullmatch(key) or ".." in key:
        raise ValueError(f"not an audio store key: {key[:80]!r}")
    return key


class StoreError(Exception):
    """The store could not be written or read (full, unreachable, refused): retryable."""


class AudioStore(Protocol):
    """Objects by key; every call may raise StoreError."""

    url: str

    async def put(self, key: str, data: bytes) -> None:
        """Write `key` durably (a reader sees all of it or nothing)."""

    async def get(self, key: str) -> bytes | None:
        """The object, or None when it is gone."""

    async def read(self, key: str, start: int, length: int) -> bytes | None:
        """`length` bytes of the object from `start` (fewer at its end), or None when it is gone:
        a large file is sent piece by piece, never held whole."""

    async def copy(self, source: str, key: str) -> bool:
        """`key` as a copy of `source` (False: `source` is gone)."""

    async def delete(self, key: str) -> None:
        """Remove `key` (nothing happens when it is gone)."""

    async def free_bytes(self) -> int | None:
        """Room left for new objects (None: unknown, or without bound)."""

    def listing(self) -> AsyncIterator[tuple[str, float]]:
        """Every key with the time it was written (unix seconds), for the sweeper."""

    async def presign(
        self, key: str, expires_s: int, content_type: str, disposition: str
    ) -> str | None:
        """A URL that serves `key` to anyone for `expires_s` seconds (None: the store has none)."""

    def local_path(self, key: str) -> str | None:
        """Where `key` is a file on this machine's disk (None: the store keeps no files here)."""

    async def aclose(self) -> None:
        """Release connections (the process's last use of the store)."""
