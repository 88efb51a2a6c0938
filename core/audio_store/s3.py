"""An audio store in an S3-compatible bucket (AWS S3, MinIO, Ceph, R2, GCS's S3 API).

The client is aiobotocore: botocore's own credential chain (the AWS_* variables, the shared
credentials and config files, container and instance roles, web identity on Kubernetes) and its
endpoint settings (AWS_ENDPOINT_URL_S3), over aiohttp, which the service runs on already.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aiohttp

from core.audio_store.base import StoreError, valid_key

try:
    from aiobotocore.session import get_session
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError
except ImportError:  # the optional extra: an s3:// setting says what to install
    get_session = None

_MISSING = ("NoSuchKey", "404", "NotFound")
# Seconds to open a connection: a store that does not answer becomes a StoreError that the
# worker retries (its lease renewed), never a worker waiting on a socket.
CONNECT_TIMEOUT_S = 5.0
ATTEMPTS = 2  # botocore retries a call once itself; the worker's loop retries what is left
PAGE = 1000  # keys per listing request (S3's own maximum)


def parse_s3_url(url: str) -> dict[str, str]:
    """`s3://bucket/prefix?endpoint=URL&region=R&addressing=path|virtual` as its parts."""
    parts = urlsplit(url)
    if not parts.netloc:
        raise ValueError(
            f"CHATTTS_AUDIO_STORE={url!r}: an S3 URL names a bucket: s3://bucket/prefix"
        )
    query = {name: values[-1] for name, values in parse_qs(parts.query).items()}
    unknown = set(query) - {"endpoint", "region", "addressing"}
    if unknown:
        raise ValueError(
            f"CHATTTS_AUDIO_STORE={url!r}: unknown option {sorted(unknown)[0]!r}; "
            "known: endpoint, region, addressing"
        )
    if query.get("addressing", "path") not in ("path", "virtual"):
        raise ValueError(f"CHATTTS_AUDIO_STORE={url!r}: addressing is path or virtual")
    return {"bucket": parts.netloc, "prefix": parts.path.strip("/"), **query}


class S3Store:
    def __init__(self, url: str, timeout_s: float = 30.0) -> None:
        if get_session is None:
            raise ValueError(
                f"CHATTTS_AUDIO_STORE={url!r} needs the S3 client: pip install 'chattts-online[s3]'"
            )
        options = parse_s3_url(url)
        self.url = url
        self.bucket = options["bucket"]
        self._prefix = options["prefix"] + "/" if options["prefix"] else ""
        self._endpoint = options.get("endpoint")
        self._region = options.get("region")
        # A custom endpoint (MinIO, Ceph) is addressed by path unless told otherwise; AWS itself
        # by the bucket's host name.
        default = "path" if self._endpoint else "virtual"
        self._config = Config(
            s3={"addressing_style": options.get("addressing", default)},
            signature_version="s3v4",
            # Both attempts of a call fit in the caller's bound (CHATTTS_AUDIO_STORE_TIMEOUT_S).
            connect_timeout=min(CONNECT_TIMEOUT_S, timeout_s / (2 * ATTEMPTS)),
            read_timeout=max(1.0, timeout_s / (2 * ATTEMPTS)),
            retries={"mode": "standard", "max_attempts": ATTEMPTS},
        )
        self._client: Any = None
        self._stack = contextlib.AsyncExitStack()
        self._opening = asyncio.Lock()

    async def _s3(self) -> Any:
        # The client belongs to the loop that first uses it (the process's only loop).
        if self._client is None:
            async with self._opening:
                if self._client is None:
                    creator = get_session().create_client(
                        "s3",
                        endpoint_url=self._endpoint,
                        region_name=self._region,
                        config=self._config,
                    )
                    self._client = await self._stack.enter_async_context(creator)
        return self._client

    def _key(self, key: str) -> str:
        return self._prefix + valid_key(key)

    async def put(self, key: str, data: bytes) -> None:
        # S3 makes an object visible whole or not at all once PUT answers 200: durable.
        async with _errors("write"):
            await (await self._s3()).put_object(Bucket=self.bucket, Key=self._key(key), Body=data)

    async def get(self, key: str) -> bytes | None:
        return await self._get_object(key)

    async def read(self, key: str, start: int, length: int) -> bytes | None:
        return await self._get_object(key, Range=f"bytes={start}-{start + max(1, length) - 1}")

    async def _get_object(self, key: str, **options: str) -> bytes | None:
        async with _errors("read"):
            try:
                answer = await (await self._s3()).get_object(
                    Bucket=self.bucket, Key=self._key(key), **options
                )
            except ClientError as exc:
                if _code(exc) in _MISSING:
                    return None
                if _code(exc) == "InvalidRange":  # a range from past its end: nothing more
                    return b""
                raise
            async with answer["Body"] as body:
                data: bytes = await body.read()
                return data

    async def copy(self, source: str, key: str) -> bool:
        # A server-side copy: the bytes never travel through this process.
        async with _errors("copy"):
            try:
                await (await self._s3()).copy_object(
                    Bucket=self.bucket,
                    Key=self._key(key),
                    CopySource={"Bucket": self.bucket, "Key": self._key(source)},
                )
            except ClientError as exc:
                if _code(exc) in _MISSING:
                    return False
                raise
            return True

    async def delete(self, key: str) -> None:
        async with _errors("delete"):
            await (await self._s3()).delete_object(Bucket=self.bucket, Key=self._key(key))

    async def free_bytes(self) -> int | None:
        return None  # a bucket has no capacity to read; its provider's quota says no with errors

    async def listing(self) -> AsyncIterator[tuple[str, float]]:
        async with _errors("list"):
            pages = (await self._s3()).get_paginator("list_objects_v2")
            async for page in pages.paginate(
                Bucket=self.bucket, Prefix=self._prefix, PaginationConfig={"PageSize": PAGE}
            ):
                for entry in page.get("Contents", ()):
                    yield entry["Key"][len(self._prefix) :], entry["LastModified"].timestamp()

    def local_path(self, key: str) -> str | None:
        return None  # objects live in the bucket

    async def presign(
        self, key: str, expires_s: int, content_type: str, disposition: str
    ) -> str | None:
        """A URL that serves `key` for `expires_s` seconds without credentials (Range and ETag
        answered by the store itself)."""
        async with _errors("sign"):
            url: str = await (await self._s3()).generate_presigned_url(
                "get_object",
                Params={
                    "Bucket": self.bucket,
                    "Key": self._key(key),
                    "ResponseContentType": content_type,
                    "ResponseContentDisposition": disposition,
                },
                ExpiresIn=expires_s,
            )
            return url

    async def aclose(self) -> None:
        await self._stack.aclose()
        self._client = None


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


@contextlib.asynccontextmanager
async def _errors(action: str) -> AsyncIterator[None]:
    """The client's failures (refused, unreachable, timed out) as a retryable StoreError."""
    try:
        yield
    except ClientError as exc:
        raise StoreError(f"S3 refused to {action}: {_code(exc)} {exc}") from exc
    except (TimeoutError, BotoCoreError, aiohttp.ClientError, OSError) as exc:
        raise StoreError(f"S3 could not {action}: {exc}") from exc
