"""The archive in S3-compatible object storage: what a cluster of workers shares.

``s3://bucket/prefix`` names where; ``RESEARCH_ARCHIVE_ENDPOINT`` points at a non-AWS service
(MinIO, Ceph, R2); credentials and region come from botocore's standard chain (``AWS_*`` variables,
shared files, instance roles), so none is ever in this project's configuration or logs.

The client is aiobotocore: botocore's own request signing, retries and error model (the reference
implementation every S3-compatible service is tested against) on top of aiohttp, which this
worker already runs; obstore is fast but brings a second HTTP stack in Rust with its own TLS and
retry settings to keep in line. The exception is a record's PUT, the one request per fetch:
``worker.archive.signed_put`` has botocore's S3 signer sign it and sends it on aiohttp, to the URL
and with the credentials the client has, since the client's generic path cost the event loop a
millisecond a record. A record is created with ``If-None-Match: *`` where the
service honours it, so an existing record is never overwritten; its key is a fresh UUID in any case.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from aiobotocore.config import AioConfig
from aiobotocore.session import AioSession, get_session
from botocore.exceptions import BotoCoreError, ClientError

from worker.archive.ids import RECORDS
from worker.archive.signed_put import SignedPut
from worker.archive.store import StoreFailed

# aiobotocore's client is built from botocore's service model at run time: untyped here.
S3Client = Any

CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 20.0
DELETE_BATCH = 1000


class S3Store:
    def __init__(self, bucket: str, prefix: str, endpoint: str | None) -> None:
        self.bucket = bucket
        self.prefix = prefix
        self.endpoint = endpoint
        self._stack = contextlib.AsyncExitStack()
        self._client: S3Client = None
        self._session: AioSession | None = None
        self._put: SignedPut | None = None

    @property
    def where(self) -> str:
        shown = f"s3://{self.bucket}/{self.prefix}"
        return f"{shown} at {self.endpoint}" if self.endpoint else shown

    async def _s3(self) -> S3Client:
        if self._client is None:
            config = AioConfig(
                connect_timeout=CONNECT_TIMEOUT_S,
                read_timeout=READ_TIMEOUT_S,
                retries={"max_attempts": 2, "mode": "standard"},
                # Checksums on every request only where asked: some S3-compatible services refuse
                # the newer default headers.
                request_checksum_calculation="when_required",
                response_checksum_validation="when_required",
            )
            self._session = get_session()
            creator = self._session.create_client("s3", endpoint_url=self.endpoint, config=config)
            self._client = await self._stack.enter_async_context(creator)
        return self._client

    async def _putter(self) -> SignedPut:
        if self._put is None:
            s3 = await self._s3()
            assert self._session is not None
            async with _failing("write"):
                self._put = await SignedPut.open(
                    self._session, s3, self.bucket, timeouts=(CONNECT_TIMEOUT_S, READ_TIMEOUT_S)
                )
            self._stack.push_async_callback(self._put.close)
        return self._put

    @property
    def identity(self) -> str:
        return f"s3:{self.endpoint or 'aws'}:{self.bucket}/{self.prefix}"

    def _key(self, key: str) -> str:
        return f"{self.prefix}{key}"

    async def create(self, key: str, data: bytes) -> None:
        put = await self._putter()
        code = await put(self._key(key), data)
        if code is not None:
            raise refusal(code, "write")

    async def stream(self, key: str) -> AsyncIterator[bytes]:
        s3 = await self._s3()
        async with _failing("read"):
            answer = await s3.get_object(Bucket=self.bucket, Key=self._key(key))
            async with answer["Body"] as body:
                async for chunk in body.iter_chunks(1 << 20):
                    yield chunk

    async def days(self) -> list[str]:
        s3 = await self._s3()
        base = self._key(RECORDS)
        found: list[str] = []
        async with _failing("list"):
            pages = s3.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=base, Delimiter="/"
            )
            async for page in pages:
                for common in page.get("CommonPrefixes", []):
                    found.append(common.get("Prefix", "")[len(base) :].rstrip("/"))
        return sorted(day for day in found if day)

    async def delete_day(self, day: str) -> int:
        s3 = await self._s3()
        prefix = self._key(f"{RECORDS}{day}/")
        deleted = 0
        async with _failing("delete"):
            pages = s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
            batch: list[Any] = []
            async for page in pages:
                for item in page.get("Contents", []):
                    batch.append({"Key": item["Key"]})
                    if len(batch) == DELETE_BATCH:
                        await s3.delete_objects(Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True})
                        deleted, batch = deleted + len(batch), []
            if batch:
                await s3.delete_objects(Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True})
                deleted += len(batch)
        return deleted

    async def close(self) -> None:
        await self._stack.aclose()
        self._client = self._session = self._put = None


@contextlib.asynccontextmanager
async def _failing(doing: str) -> AsyncIterator[None]:
    """botocore's and the network's errors as one StoreFailed, worded by the service's error code."""
    try:
        yield
    except ClientError as exc:
        raise refusal(str(exc.response.get("Error", {}).get("Code", "error")), doing) from None
    except (BotoCoreError, OSError) as exc:
        raise StoreFailed(
            f"the object store could not be reached to {doing} ({type(exc).__name__})"
        ) from None


def refusal(code: str, doing: str) -> StoreFailed:
    """The service's error code as a StoreFailed (a code that is not a plain word is not shown)."""
    if code in ("NoSuchKey", "404"):
        return StoreFailed("no such key")
    if code in ("PreconditionFailed", "ConditionalRequestConflict"):
        return StoreFailed("the file exists already")
    shown = code if code.isalnum() and len(code) <= 64 else "an error"
    return StoreFailed(f"the object store refused to {doing} ({shown})")
