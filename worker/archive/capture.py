"""What the archive keeps of a fetch: each hop's request and response as they went over the wire.

The fetcher (``jobs.fetcher``) tells a ``Capture`` of each hop as it happens: the response head as
received (aiohttp's raw header bytes, in the server's order and spelling), the address the guarded
connection actually reached, and each body chunk as read. It keeps what was read and nothing more:
the body as it arrived with its Content-Encoding (a gzip body stays gzip), within what the fetch
read under its caps. Transfer coding is the one thing undone (aiohttp removes chunking before the
fetcher sees a byte), so a ``Transfer-Encoding`` header is kept under ``X-Archive-Orig-`` and the
record's payload is the de-chunked body, as WARC 1.1 defines the payload.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from worker.guardian.connector import CONNECTED

if TYPE_CHECKING:
    import aiohttp

    from worker.guardian.urls import Target

RENAMED = b"x-archive-orig-"


@dataclass
class Hop:
    """One request and its response."""

    url: str
    at: dt.datetime
    peer: str | None  # the validated address the connection reached
    request_head: bytes
    response_head: bytes  # status line and header fields as received, ending in an empty line
    identity: bool  # no Content-Encoding: the wire bytes are the decoded bytes
    chunks: list[bytes] = field(default_factory=list)
    truncated: str | None = None  # WARC-Truncated: "length" when the fetch stopped reading at a cap
    complete: bool = False  # the fetcher finished with its body (read to the end, or to a cap)

    def body(self) -> bytes:
        return b"".join(self.chunks)


class Capture:
    """The hops of one fetch, in order; the last is the one whose body the reader read."""

    def __init__(self) -> None:
        self.hops: list[Hop] = []
        # The connector appends each connection's peer here (worker.guardian.connector.CONNECTED),
        # one per request, in order: the hop's address is the last one heard when its head arrives.
        self.peers: list[str | None] = []

    def opened(self, target: Target, response: aiohttp.ClientResponse) -> None:
        """A response head arrived for ``target``: a new hop (a redirect's body is never read)."""
        self.hops.append(
            Hop(
                url=target.url,
                at=dt.datetime.now(dt.UTC),
                peer=self.peers[-1] if self.peers else peer_address(response),
                request_head=request_head(response),
                response_head=response_head(response),
                identity=_identity(response.headers.get("Content-Encoding")),
            )
        )

    def read(self, chunk: bytes) -> None:
        if self.hops:
            self.hops[-1].chunks.append(chunk)

    def finished(self, decoded: int, cut: bool) -> None:
        """The body ended: ``decoded`` bytes went to the reader; ``cut`` when a cap stopped it.

        An identity body is kept to exactly what the reader got, so the record's content hashes
        to the result's sha256; a compressed body is kept as read (its last chunk may decode past
        the cap), and its first ``decoded`` bytes are the reader's.
        """
        if not self.hops:
            return
        hop = self.hops[-1]
        hop.complete = True
        if cut:
            hop.truncated = "length"
            if hop.identity:
                hop.chunks = [hop.body()[:decoded]]

    def failed(self, why: str) -> None:
        """The fetch ended in an error before its last body was read to the end (a refused type,
        a timeout, a connection lost): what was kept of it is marked cut, with why."""
        hop = self.final
        if hop is not None and not hop.complete and (hop.chunks or why != "length" or not _redirect(hop)):
            hop.truncated = why

    @property
    def final(self) -> Hop | None:
        return self.hops[-1] if self.hops else None


@contextlib.contextmanager
def hearing(capture: Capture | None) -> Iterator[None]:
    """While it lasts, the guarded connector tells ``capture`` the address of each connection."""
    if capture is None:
        yield
        return
    token = CONNECTED.set(capture.peers)
    try:
        yield
    finally:
        CONNECTED.reset(token)


def _redirect(hop: Hop) -> bool:
    status = hop.response_head[9:12]
    return status in (b"301", b"302", b"303", b"307", b"308")


def _identity(content_encoding: str | None) -> bool:
    """No coding but identity: the bytes on the wire are the bytes the reader got."""
    return all(part.strip().lower() in ("", "identity") for part in (content_encoding or "").split(","))


def peer_address(response: aiohttp.ClientResponse) -> str | None:
    """The address the socket is connected to (the guardian judged it before connecting)."""
    connection = response.connection
    transport = connection.transport if connection is not None else None
    peer = transport.get_extra_info("peername") if transport is not None else None
    if isinstance(peer, tuple) and peer and isinstance(peer[0], str):
        return peer[0].split("%", 1)[0]
    return None


def request_head(response: aiohttp.ClientResponse) -> bytes:
    """The request line and the headers aiohttp sent (it keeps no copy of the bytes themselves)."""
    info = response.request_info
    target = info.url.raw_path_qs or "/"
    lines = [f"{info.method} {target} HTTP/1.1".encode()]
    headers = info.headers
    if "Host" not in headers and info.url.raw_host:
        lines.append(b"Host: " + _host(info.url.raw_host, info.url.port, info.url.scheme))
    for name, value in headers.items():
        lines.append(name.encode("latin-1", "replace") + b": " + value.encode("latin-1", "replace"))
    return b"\r\n".join(lines) + b"\r\n\r\n"


def _host(host: str, port: int | None, scheme: str) -> bytes:
    shown = f"[{host}]" if ":" in host else host
    default = 443 if scheme == "https" else 80
    return (shown if port in (None, default) else f"{shown}:{port}").encode("ascii", "replace")


def response_head(response: aiohttp.ClientResponse) -> bytes:
    version = response.version
    major, minor = (version.major, version.minor) if version is not None else (1, 1)
    try:
        reason = (response.reason or "").encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        reason = (response.reason or "").encode("utf-8", "replace")
    lines = [f"HTTP/{major}.{minor} {response.status} ".encode() + reason]
    for name, value in response.raw_headers:
        if name.lower() == b"transfer-encoding":
            name = RENAMED + name  # the payload below is de-chunked; readers must not de-chunk it
        lines.append(name + b": " + value)
    return b"\r\n".join(lines) + b"\r\n\r\n"
