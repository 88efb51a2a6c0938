"""An audio store in a directory: local disk for one machine, or a volume every host mounts.

Files are written under a temporary name, flushed and renamed into place (readers never see half
an object); a copy is a hard link where the filesystem allows it (no bytes duplicated). Every call
runs in one of the store's own threads: the event loop never waits on the disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from core.audio_store.base import StoreError, valid_key

_TMP = ".tmp-"  # the prefix of files being written: never listed as keys
T = TypeVar("T")


# Threads one process reads and writes its files with: the store's own, so that other work in
# threads (subtitle builds, encodes) cannot make a download wait for a thread.
IO_THREADS = 8


class FileStore:
    def __init__(self, root: str) -> None:
        self.root = Path(root)
        self.url = f"file://{self.root}"
        self._pool = ThreadPoolExecutor(IO_THREADS, thread_name_prefix="store-io")

    def _path(self, key: str) -> Path:
        return self.root / valid_key(key)

    async def put(self, key: str, data: bytes) -> None:
        await self._thread(self._put, self._path(key), data)

    @staticmethod
    def _put(path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{_TMP}{uuid.uuid4().hex}")
        try:
            with tmp.open("wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            tmp.replace(path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    async def get(self, key: str) -> bytes | None:
        return await self._thread(self._read, self._path(key))

    async def read(self, key: str, start: int, length: int) -> bytes | None:
        return await self._thread(self._read, self._path(key), start, length)

    @staticmethod
    def _read(path: Path, start: int = 0, length: int = -1) -> bytes | None:
        try:
            with path.open("rb") as file:
                file.seek(start)
                return file.read(length)
        except FileNotFoundError:
            return None

    async def copy(self, source: str, key: str) -> bool:
        return await self._thread(self._copy, self._path(source), self._path(key))

    @classmethod
    def _copy(cls, source: Path, path: Path) -> bool:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(source, path)
            return True
        except FileNotFoundError:
            return False
        except FileExistsError:
            return True
        except OSError:  # no hard links here (another device, a filesystem without them)
            data = cls._read(source)
            if data is None:
                return False
            cls._put(path, data)
            return True

    async def delete(self, key: str) -> None:
        await self._thread(self._delete, self._path(key))

    @staticmethod
    def _delete(path: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()

    async def free_bytes(self) -> int | None:
        return await self._thread(self._free)

    def _free(self) -> int | None:
        path = self.root
        while not path.exists() and path != path.parent:  # not made yet: its filesystem's room
            path = path.parent
        return shutil.disk_usage(path).free

    async def listing(self) -> AsyncIterator[tuple[str, float]]:
        for key, mtime in await self._thread(self._list):
            yield key, mtime

    def _list(self) -> list[tuple[str, float]]:
        out = []
        for path in self.root.rglob("*"):
            if path.is_file() and not path.name.startswith(_TMP):
                with contextlib.suppress(FileNotFoundError):
                    out.append((path.relative_to(self.root).as_posix(), path.stat().st_mtime))
        return out

    async def presign(
        self, key: str, expires_s: int, content_type: str, disposition: str
    ) -> str | None:
        return None  # files are served by the web tier

    def local_path(self, key: str) -> str | None:
        return str(self._path(key).resolve())

    async def aclose(self) -> None:
        self._pool.shutdown(wait=False)

    async def _thread(self, fn: Callable[..., T], *args: Any) -> T:
        try:
            return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)
        except OSError as exc:  # full, read-only, unmounted: the caller retries or gives up
            raise StoreError(f"{type(exc).__name__}: {exc}") from exc
