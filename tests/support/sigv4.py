"""A SigV4 verifier for S3 requests as a server receives them: the oracle for the archive's signed
PUT. Written from the specification (canonical request, string to sign, a signing key derived per
day, region and service), not from botocore's signer, which is the code under test; checked against
the worked example in AWS's S3 documentation (tests/test_archive_s3.py)."""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass

from multidict import CIMultiDict

_AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<day>\d{8})/(?P<region>[^/]+)/s3/aws4_request,"
    r" ?SignedHeaders=(?P<names>[a-z0-9;-]+), ?Signature=(?P<signature>[0-9a-f]{64})"
)
SKEW = dt.timedelta(minutes=15)  # S3's limit on a request's clock
MUST_SIGN = ("host", "x-amz-date", "x-amz-content-sha256")


@dataclass(frozen=True)
class Received:
    method: str
    path: str  # as it came over the wire: percent-encoded, no query string
    headers: CIMultiDict[str]
    body: bytes


@dataclass(frozen=True)
class Verdict:
    """``reason`` is None when the signature is valid."""

    reason: str | None
    access_key: str = ""
    region: str = ""
    signed: tuple[str, ...] = ()


def verify(request: Received, secrets: Mapping[str, str], now: dt.datetime) -> Verdict:
    """Whether ``request`` carries a valid SigV4 signature by one of ``secrets`` (access key to
    secret key), made within S3's clock skew of ``now``, over the SHA-256 of the body received."""
    found = _AUTHORIZATION.fullmatch(request.headers.get("Authorization", ""))
    if found is None:
        return Verdict("no SigV4 Authorization")
    key, day, region = found["key"], found["day"], found["region"]
    names = tuple(found["names"].split(";"))
    verdict = Verdict(None, key, region, names)

    def refused(reason: str) -> Verdict:
        return Verdict(reason, key, region, names)

    if key not in secrets:
        return refused("unknown access key")
    stamp = request.headers.get("X-Amz-Date", "")
    try:
        when = dt.datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.UTC)
    except ValueError:
        return refused("no X-Amz-Date")
    if abs(when - now) > SKEW or stamp[:8] != day:
        return refused("out of date")
    if list(names) != sorted(set(names)):
        return refused("signed headers not sorted")
    unsigned = [name for name in (*MUST_SIGN, *_amz_headers(request.headers)) if name not in names]
    if unsigned:
        return refused(f"not signed: {', '.join(unsigned)}")
    payload = request.headers.get("X-Amz-Content-SHA256", "")
    if payload != hashlib.sha256(request.body).hexdigest():
        return refused("the payload's SHA-256 is not the body's")
    lines = [request.method, request.path, ""]
    for name in names:
        values = request.headers.getall(name, [])
        if not values:
            return refused(f"signed but absent: {name}")
        lines.append(name + ":" + ",".join(" ".join(value.split()) for value in values))
    canonical = "\n".join([*lines, "", ";".join(names), payload])
    scope = f"{day}/{region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    signing_key = ("AWS4" + secrets[key]).encode()
    for part in (day, region, "s3", "aws4_request"):
        signing_key = hmac.new(signing_key, part.encode(), hashlib.sha256).digest()
    expected = hmac.new(signing_key, to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, found["signature"]):
        return refused("signature does not match")
    return verdict


def _amz_headers(headers: CIMultiDict[str]) -> set[str]:
    """S3 wants every ``x-amz-*`` header sent signed."""
    return {name.lower() for name in headers if name.lower().startswith("x-amz-")}
