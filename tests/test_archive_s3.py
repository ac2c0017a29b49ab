"""The archive's own S3 PUT (worker.archive.signed_put): what goes over the wire carries a SigV4
signature that an independent verifier (tests/support/sigv4.py, written from the specification)
accepts, its keys land where botocore reads them, and it answers a service's refusals and
throttles as the client's standard retry mode does."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import pytest
from aiohttp import web
from multidict import CIMultiDict

from tests.support.archive import aws_environment, make_bucket, moto_s3
from tests.support.sigv4 import Received, Verdict, verify
from worker.archive.s3 import S3Store
from worker.archive.signed_put import host_header
from worker.archive.store import StoreFailed

ACCESS_KEY = "AKIDEXAMPLE"
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"


def test_the_verifier_accepts_aws_s_worked_example_and_nothing_altered() -> None:
    # The GET Object example of AWS's "Signature Calculations for the Authorization Header" (S3).
    secrets = {"AKIAIOSFODNN7EXAMPLE": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}
    signature = "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
    headers = {
        "Host": "examplebucket.s3.amazonaws.com",
        "Range": "bytes=0-9",
        "x-amz-content-sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "x-amz-date": "20130524T000000Z",
        "Authorization": "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
        f"aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature={signature}",
    }
    when = dt.datetime(2013, 5, 24, 0, 5, tzinfo=dt.UTC)

    def check(
        changes: dict[str, str],
        path: str = "/test.txt",
        body: bytes = b"",
        late: int = 0,
        keys: Any = secrets,
    ) -> str | None:
        request = Received("GET", path, CIMultiDict({**headers, **changes}), body)
        return verify(request, keys, when + dt.timedelta(minutes=late)).reason

    assert check({}) is None
    assert check({"Range": "bytes=0-10"}) == "signature does not match"
    assert check({}, path="/test2.txt") == "signature does not match"
    assert check({}, body=b"x") == "the payload's SHA-256 is not the body's"
    assert check({"x-amz-meta-a": "b"}) == "not signed: x-amz-meta-a"
    altered = headers["Authorization"].replace(signature, signature[::-1])
    assert check({"Authorization": altered}) == "signature does not match"
    assert check({}, late=60) == "out of date"
    assert check({}, keys={"AKIAIOSFODNN7EXAMPLE": "another secret"}) == "signature does not match"
    assert check({}, keys={"other": "x"}) == "unknown access key"


def credentials(monkeypatch: pytest.MonkeyPatch, region: str, token: str | None = None) -> None:
    """Throwaway credentials where botocore's standard chain reads them, with a session token."""
    aws_environment(monkeypatch, key=ACCESS_KEY, secret=SECRET_KEY, region=region)
    if token is not None:
        monkeypatch.setenv("AWS_SESSION_TOKEN", token)


@contextlib.asynccontextmanager
async def answering(
    statuses: list[tuple[int, bytes]], seen: list[tuple[Received, Verdict]], secret: str = SECRET_KEY
) -> AsyncIterator[str]:
    """A loopback S3 stand-in that answers each PUT with the next of ``statuses`` and keeps what
    it received with the verifier's verdict on its signature (by ``secret``)."""

    async def put(request: web.Request) -> web.Response:
        received = Received(
            request.method, request.raw_path, CIMultiDict(request.headers), await request.read()
        )
        seen.append((received, verify(received, {ACCESS_KEY: secret}, dt.datetime.now(dt.UTC))))
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


@pytest.mark.parametrize(
    ("prefix", "region", "token"),
    [
        ("", "us-east-1", None),
        ("run a b+ü~/", "eu-west-1", "session-token/with+odd=chars"),  # a URL must encode some
    ],
)
async def test_a_put_carries_a_signature_an_independent_verifier_accepts(
    prefix: str, region: str, token: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    credentials(monkeypatch, region, token)
    seen: list[tuple[Received, Verdict]] = []
    data = b"WARC/1.1\r\n" * 1000
    key = "records/2026-03-04/0190a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b.warc.gz"
    async with answering([(200, b"")], seen) as endpoint:
        store = S3Store("evidence", prefix, endpoint)
        try:
            await store.create(key, data)
        finally:
            await store.close()
    [(received, verdict)] = seen
    assert verdict.reason is None
    assert (verdict.access_key, verdict.region) == (ACCESS_KEY, region)
    assert received.path == "/evidence/" + quote(prefix + key, safe="/~")
    assert received.body == data
    assert received.headers["If-None-Match"] == "*"
    assert "if-none-match" in verdict.signed  # the precondition cannot be stripped on the way
    assert received.headers.get("X-Amz-Security-Token") == token


async def test_a_put_signed_with_another_secret_is_refused_by_the_verifier(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    credentials(monkeypatch, "us-east-1")
    seen: list[tuple[Received, Verdict]] = []
    async with answering([(403, error("SignatureDoesNotMatch"))], seen, secret="not-the-secret") as endpoint:
        store = S3Store("evidence", "", endpoint)
        try:
            with pytest.raises(StoreFailed, match="SignatureDoesNotMatch"):
                await store.create("records/2026-03-04/k.warc.gz", b"data")
        finally:
            await store.close()
    assert [verdict.reason for _, verdict in seen] == ["signature does not match"]


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
    credentials(monkeypatch, "us-east-1")
    seen: list[tuple[Received, Verdict]] = []
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
    assert [verdict.reason for _, verdict in seen] == [None] * requests  # a retry is signed afresh


@pytest.mark.parametrize(
    ("scheme", "host", "port", "header"),
    [
        ("http", "127.0.0.1", 9000, "127.0.0.1:9000"),
        ("https", "evidence.s3.amazonaws.com", None, "evidence.s3.amazonaws.com"),
        ("https", "s3.eu-west-1.amazonaws.com", 443, "s3.eu-west-1.amazonaws.com"),
        ("http", "s3.local", 80, "s3.local"),
        ("http", "::1", 9000, "[::1]:9000"),
    ],
)
def test_the_host_header_names_a_port_only_when_it_is_not_the_scheme_s(
    scheme: str, host: str, port: int | None, header: str
) -> None:
    assert host_header(scheme, host, port) == header


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

    aws_environment(monkeypatch, key="a", secret="b", region="eu-west-1")
    session = get_session()
    async with session.create_client("s3", endpoint_url=endpoint) as client:
        put = await SignedPut.open(session, client, "evidence", timeouts=(1.0, 1.0))  # sends nothing
        try:
            assert (put._base, put._region) == (base, "eu-west-1")
        finally:
            await put.close()
