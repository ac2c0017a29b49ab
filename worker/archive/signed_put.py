"""One S3 PUT that creates an object, signed by botocore's SigV4 signer and sent on aiohttp.

botocore's client runs every call through its generic path (event hooks, parameter validation,
endpoint rules, a user agent built afresh, response parsing): for the archive's one request per
record, that cost the worker's event loop about a millisecond of CPU. Here a PUT is the few
headers S3 needs, signed by botocore's own S3 signer (``S3SigV4Auth``, which signs the body's
SHA-256 whenever no checksum header is sent) with the credentials of the client's own chain
(refreshed as botocore refreshes them), to the URL botocore builds for the bucket (path or
virtual-host style, as the client is configured), asked once. The signer costs some 0.05 ms of
CPU a PUT more than a hand-written one did: too little to own SigV4 for. One retry, as the
client's standard mode with two attempts: a connection that failed, a 5xx, a throttle; each
attempt is signed afresh.
"""

from __future__ import annotations

import re
import ssl
from typing import Any
from urllib.parse import quote, urlsplit
from urllib.request import getproxies, proxy_bypass

import aiohttp
from aiobotocore.session import AioSession
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.httpsession import get_cert_path
from yarl import URL

from worker.archive.store import StoreFailed

PROBE = "research-worker-probe"
ATTEMPTS = 2
RETRIED = frozenset({429, 500, 502, 503, 504})
CONNECTIONS = 10  # botocore's default pool size
_CODE = re.compile(rb"<Code>([^<]{1,64})</Code>")
MAX_ERROR_BYTES = 64 * 1024


class SignedPut:
    """``await put(key, data)``: None once the object exists, else the service's error code."""

    def __init__(self, base: str, region: str, credentials: Any, http: aiohttp.ClientSession) -> None:
        self._base = base
        parts = urlsplit(base)
        # The Host sent is the one signed, not left to aiohttp and botocore to agree on.
        self._host = host_header(parts.scheme, parts.hostname or "", parts.port)
        # HTTP(S)_PROXY and NO_PROXY, as botocore honours them, read once (aiohttp's trust_env
        # would also look in ~/.netrc, in a thread, on every request).
        bypass = proxy_bypass(parts.hostname or "")
        self._proxy = None if bypass else getproxies().get(parts.scheme)
        self._region = region
        self._credentials = credentials
        self._http = http

    @classmethod
    async def open(
        cls, session: AioSession, client: Any, bucket: str, *, timeouts: tuple[float, float]
    ) -> SignedPut:
        """Raises botocore's errors (the caller words them) when the URL or credentials are not to be had."""
        base, region = await _botocore_target(client, bucket)
        credentials = await session.get_credentials()
        if credentials is None:
            raise StoreFailed("the object store refused to write (no credentials)")
        verify = session.get_config_variable("ca_bundle") or get_cert_path(True)
        context = ssl.create_default_context(cafile=verify if isinstance(verify, str) else None)
        connect_s, read_s = timeouts
        http = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=CONNECTIONS, ssl=context),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=connect_s, sock_read=read_s),
            auto_decompress=False,
        )
        return cls(base, region, credentials, http)

    async def __call__(self, key: str, data: bytes) -> str | None:
        quoted = quote(key, safe="/~")
        url = URL(self._base + quoted, encoded=True)
        for attempt in range(ATTEMPTS):
            last = attempt == ATTEMPTS - 1
            frozen = await self._credentials.get_frozen_credentials()
            request = AWSRequest("PUT", self._base + quoted, {"Host": self._host, "If-None-Match": "*"}, data)
            S3SigV4Auth(frozen, "s3", self._region).add_auth(request)
            headers = dict(request.headers.items())
            try:
                async with self._http.put(url, data=data, headers=headers, proxy=self._proxy) as response:
                    if response.status == 200:
                        return None
                    detail = await response.content.read(MAX_ERROR_BYTES)
            except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                if last:
                    raise StoreFailed(
                        f"the object store could not be reached to write ({type(exc).__name__})"
                    ) from None
                continue
            found = _CODE.search(detail)
            code = found.group(1).decode("ascii", "replace") if found else str(response.status)
            if response.status == 412:
                return "PreconditionFailed"
            if last or not (response.status in RETRIED or code in ("SlowDown", "Throttling")):
                return code
        return "error"  # not reached: the last attempt returns or raises

    async def close(self) -> None:
        await self._http.close()


class _Seen(Exception):
    """What botocore was about to send, caught before it went."""


async def _botocore_target(client: Any, bucket: str) -> tuple[str, str]:
    """The URL up to the key, and the signing region, of a PUT as botocore builds it for this
    client (its endpoint rules: path or virtual-host style, the regional host): one PUT is built
    and signed, and stopped before it is sent."""

    def stop(request: Any, **_: Any) -> None:
        raise _Seen(str(request.url), request.headers.get("Authorization", b""))

    client.meta.events.register_first("before-send.s3.PutObject", stop)
    try:
        await client.put_object(Bucket=bucket, Key=PROBE, Body=b"", IfNoneMatch="*")
    except _Seen as seen:
        url, authorization = seen.args
    else:
        raise StoreFailed("the object store's URL could not be worked out")
    finally:
        client.meta.events.unregister("before-send.s3.PutObject", stop)
    text = (
        authorization.decode("ascii", "replace") if isinstance(authorization, bytes) else str(authorization)
    )
    scope = re.search(r"Credential=[^/]+/\d{8}/([^/]+)/s3/aws4_request", text)
    if scope is None or not url.endswith("/" + PROBE):
        raise StoreFailed("the object store's URL could not be worked out")
    return url.removesuffix(PROBE), scope.group(1)


def host_header(scheme: str, host: str, port: int | None) -> str:
    """The Host a signature covers: the port only when it is not the scheme's default."""
    shown = f"[{host}]" if ":" in host else host
    if port is None or port == {"http": 80, "https": 443}.get(scheme):
        return shown
    return f"{shown}:{port}"
