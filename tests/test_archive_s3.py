"""The archive's own S3 PUT (worker.archive.signed_put): its SigV4 signature is botocore's, its
keys land where botocore reads them, and it answers a service's refusals and throttles as the
client's standard retry mode does."""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import botocore.auth
import pytest
from aiohttp import web
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.support.archive import make_bucket, moto_s3
from worker.archive.s3 import S3Store
from worker.archive.signed_put import host_header, sign
from worker.archive.store import StoreFailed

NOW = dt.datetime(2026, 3, 4, 5, 6, 7, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("url", "region", "token"),
    [
        ("http://127.0.0.1:9000/evidence/run/records/2026-03-04/a.warc.gz", "us-east-1", None),
        ("https://evidence.s3.amazonaws.com/records/2026-03-04/a.warc.gz", "us-east-1", "session-token"),
        ("https://s3.eu-west-1.amazonaws.com:443/b/a%20b/%C3%BC~x/c.warc.gz", "eu-west-1", None),
        ("http://[::1]:9000/b/k", "auto", None),
    ],
)
def test_the_signature_is_the_one_botocore_s_signer_makes(
    url: str, region: str, token: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: NOW.replace(tzinfo=None))
    credentials = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", token)
    body = b"WARC/1.1\r\n" * 100
    theirs = AWSRequest(method="PUT", url=url, data=body, headers={"If-None-Match": "*"})
    botocore.auth.S3SigV4Auth(credentials.get_frozen_credentials(), "s3", region).add_auth(theirs)

    parts = urlsplit(url)
    ours = {
        "Host": host_header(parts.scheme, parts.hostname or "", parts.port),
        "If-None-Match": "*",
        "X-Amz-Content-SHA256": hashlib.sha256(body).hexdigest(),
    }
    if token:
        ours["X-Amz-Security-Token"] = token
    authorization = sign("PUT", parts.path, ours, credentials.get_frozen_credentials(), region, NOW)
    assert authorization == theirs.headers["Authorization"]
    assert ours["X-Amz-Date"] == theirs.headers["X-Amz-Date"]


async def test_a_record_lands_under_its_key_and_is_never_overwritten(
    monkeypatch: pytest.MonkeyPatch, token: str
) -> None:
    with moto_s3(monkeypatch) as s3:
        await make_bucket(s3.endpoint, "signed")
        prefix = f"{token}/a b+ü~/"  # characters a URL must encode, and one it must not
        store = S3Store("signed", prefix, s3.endpoint)
        key = "records/2026-03-04/0190a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b.warc.gz"
        try:
            await store.create(key, b"first")
            with pytest.raises(StoreFailed, match="exists already"):
                await store.create(key, b"second")
            client = await store._s3()
            answer = await client.get_object(Bucket="signed", Key=prefix + key)  # botocore's own read
            async with answer["Body"] as body:
                assert await body.read() == b"first"
        finally:
            await store.close()


@contextlib.asynccontextmanager
async def answering(statuses: list[tuple[int, bytes]], seen: list[str]) -> AsyncIterator[str]:
    async def put(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        await request.read()
        status, body = statuses[min(len(seen), len(statuses)) - 1]
        return web.Response(status=status, body=body)

    app = web.Application()
    app.router.add_put("/{tail:.*}", put)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


def error(code: str) -> bytes:
    return f"<?xml version='1.0'?><Error><Code>{code}</Code><Message>no</Message></Error>".encode()


@pytest.mark.parametrize(
    ("statuses", "requests", "outcome"),
    [
        ([(503, error("SlowDown")), (200, b"")], 2, None),
        (
            [(500, error("InternalError")), (500, error("InternalError"))],
            2,
            "refused to write (InternalError)",
        ),
        ([(403, error("AccessDenied")), (200, b"")], 1, "refused to write (AccessDenied)"),
        ([(412, b"")], 1, "the file exists already"),
        ([(400, error("no such; code"))], 1, "refused to write (an error)"),
    ],
)
async def test_a_throttle_or_a_5xx_is_tried_once_more_and_a_refusal_is_not(
    statuses: list[tuple[int, bytes]],
    requests: int,
    outcome: str | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[str] = []
    with moto_s3(monkeypatch):  # only for the throwaway credentials
        async with answering(statuses, seen) as endpoint:
            store: Any = S3Store("evidence", "", endpoint)
            try:
                if outcome is None:
                    await store.create("records/2026-03-04/k.warc.gz", b"data")
                else:
                    with pytest.raises(StoreFailed, match=outcome.replace("(", r"\(").replace(")", r"\)")):
                        await store.create("records/2026-03-04/k.warc.gz", b"data")
            finally:
                await store.close()
    assert len(seen) == requests
    assert all(value.startswith("AWS4-HMAC-SHA256 Credential=testing/") for value in seen)


@pytest.mark.parametrize(
    ("endpoint", "base"),
    [
        (None, "https://evidence.s3.eu-west-1.amazonaws.com/"),
        ("http://127.0.0.1:9000", "http://127.0.0.1:9000/evidence/"),
    ],
)
async def test_the_put_goes_where_botocore_s_would_signed_for_its_region(
    endpoint: str | None, base: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aiobotocore.session import get_session

    from worker.archive.signed_put import SignedPut

    for name, value in {
        "AWS_ACCESS_KEY_ID": "a",
        "AWS_SECRET_ACCESS_KEY": "b",
        "AWS_DEFAULT_REGION": "eu-west-1",
    }.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    session = get_session()
    async with session.create_client("s3", endpoint_url=endpoint) as client:
        put = await SignedPut.open(session, client, "evidence", timeouts=(1.0, 1.0))  # sends nothing
        try:
            assert (put._base, put._region) == (base, "eu-west-1")
        finally:
            await put.close()
