"""Archive fixtures: a real S3 server on loopback (moto's server mode), and reading an archive back."""

from __future__ import annotations

import contextlib
import hashlib
import io
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from worker.archive import index
from worker.archive.export import export
from worker.archive.service import open_store
from worker.config import ArchiveTarget


@dataclass(frozen=True)
class S3Server:
    endpoint: str


def aws_environment(monkeypatch: pytest.MonkeyPatch, *, key: str, secret: str, region: str) -> None:
    """Throwaway credentials and a region where botocore's standard chain reads them, and nothing
    else of the caller's AWS set-up (no profile, session token or endpoint override)."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": key,
        "AWS_SECRET_ACCESS_KEY": secret,
        "AWS_DEFAULT_REGION": region,
    }.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)


@contextlib.contextmanager
def moto_s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    """moto's S3 as a real HTTP server on 127.0.0.1, with throwaway credentials in the environment
    botocore reads (its standard chain)."""
    from moto.server import ThreadedMotoServer

    aws_environment(monkeypatch, key="testing", secret="testing", region="us-east-1")
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield S3Server(f"http://{host}:{port}")
    finally:
        server.stop()


async def make_bucket(endpoint: str, bucket: str) -> None:
    from aiobotocore.session import get_session

    async with get_session().create_client("s3", endpoint_url=endpoint) as s3:
        await s3.create_bucket(Bucket=bucket)


async def exported(redis: Any, target: ArchiveTarget, report: str, endpoint: str | None = None) -> bytes:
    store = open_store(target, endpoint)
    assert store is not None
    try:
        cited = await index.cited(redis, report)
        return b"".join([chunk async for chunk in export(store, report, cited)])
    finally:
        await store.close()


@dataclass
class Read:
    """One record read back: its WARC headers, its HTTP head, and its content with transfer and
    content coding undone (warcio's ``content_stream``)."""

    type: str
    headers: dict[str, str]
    status: str | None
    http: dict[str, str]
    content: bytes
    raw: bytes


def read_records(data: bytes) -> list[Read]:
    found = []
    for record in ArchiveIterator(io.BytesIO(data)):
        headers = dict(record.rec_headers.headers)
        http = dict(record.http_headers.headers) if record.http_headers is not None else {}
        status = record.http_headers.get_statuscode() if record.http_headers is not None else None
        raw = record.raw_stream.read() if record.rec_type not in ("response", "revisit") else b""
        content = record.content_stream().read() if record.rec_type in ("response",) else raw
        found.append(Read(record.rec_type, headers, status, http, content, raw))
    return found


def by_id(records: list[Read]) -> dict[str, Read]:
    return {r.headers["WARC-Record-ID"].strip("<>"): r for r in records}


def content_of(records: list[Read], record_id: str) -> bytes:
    """A response's content, following a revisit to its original."""
    index_ = by_id(records)
    record = index_[record_id]
    if record.type == "revisit":
        record = index_[record.headers["WARC-Refers-To"].strip("<>")]
    assert record.type == "response"
    return record.content


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
