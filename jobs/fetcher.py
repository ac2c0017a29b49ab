"""The network side of fetch_page: a guarded GET that follows redirects by hand and reads a bounded body.

The fetcher holds only what it needs: the guarded session, the address policy, the limits, and
for each fetch the rule a redirect to another site must pass (the report's hop rule, which the
tool supplies and which raises its own refusal), so it knows nothing of Redis or reports. It reads
the body as a stream and stops at the byte cap (counted after decompression, so a gzip bomb costs
at most the cap), refuses a declared binary type before reading anything, and reads a PDF whole
up to its own cap or not at all, because a cut PDF cannot be parsed.
"""

from __future__ import annotations

import asyncio
import zlib
from dataclasses import dataclass
from typing import Protocol

import aiohttp
import yarl

from jobs.decoding import Decoder
from jobs.reader.content_types import DeclaredKind, declared_kind, looks_like_document
from worker.errors import (
    ConnectionFailed,
    GuardianRefusal,
    HttpStatus,
    TooManyRedirects,
    UnsupportedContentType,
)
from worker.guardian.policy import AddressPolicy
from worker.guardian.redirects import REDIRECT_STATUSES, HopRule, next_hop, same_site
from worker.guardian.urls import Target
from worker.net.error_map import translate
from worker.net.retry_after import retry_after_s
from worker.tracing import phases

READ_CHUNK = 65_536
# An error answer's body is read for the evidence archive only, and only this far.
EVIDENCE_BYTES = 65_536
EVIDENCE_S = 1.0


class Observer(Protocol):
    """Sees each hop as it happens (the evidence archive's ``Capture``): the fetch never waits on it."""

    def opened(self, target: Target, response: aiohttp.ClientResponse) -> None: ...

    def read(self, chunk: bytes) -> None: ...

    def finished(self, decoded: int, cut: bool) -> None: ...


@dataclass(frozen=True)
class FetchLimits:
    max_bytes: int  # text bodies: more is cut, and the result says truncated
    max_pdf_bytes: int  # PDFs: more is refused, since a cut PDF cannot be parsed
    max_redirects: int


@dataclass(frozen=True)
class Fetched:
    final: Target
    status: int
    content_type: str | None
    body: bytes
    truncated: bool
    redirects: int
    # Every Cache-Control header of the final response, joined as one value (None: there was none),
    # for the shared page cache, which must not keep no-store or private pages.
    cache_control: str | None = None
    content_language: str | None = None  # the final response's Content-Language, for the metadata


class Fetcher:
    """The guarded session and the policy, built once per worker and shared by its fetch jobs."""

    def __init__(self, session: aiohttp.ClientSession, policy: AddressPolicy, limits: FetchLimits) -> None:
        self.session = session
        self.policy = policy
        self.limits = limits

    async def close(self) -> None:
        await self.session.close()

    async def get(self, target: Target, may_follow: HopRule, observer: Observer | None = None) -> Fetched:
        """GET ``target``, following at most ``max_redirects`` hops, each judged again in full."""
        current = target
        for hop in range(self.limits.max_redirects + 1):
            response = await self._request(current)
            if observer is not None:
                observer.opened(current, response)
            try:
                location = response.headers.get("Location")
                if response.status in REDIRECT_STATUSES and location is not None:
                    if hop == self.limits.max_redirects:
                        raise TooManyRedirects(
                            f"more than {self.limits.max_redirects} redirects; the last came from "
                            f"{current.host}"
                        )
                    try:
                        following = next_hop(current, location, self.policy)
                    except GuardianRefusal as refusal:
                        raise refused_redirect(current, refusal) from None
                    if not same_site(current, following):
                        await may_follow(current, following)
                    current = following
                    continue
                return await self._read(current, response, hop, observer)
            finally:
                response.release()
        raise AssertionError("unreachable: the loop returns or raises")

    async def _request(self, target: Target) -> aiohttp.ClientResponse:
        try:
            return await self.session.get(yarl.URL(target.url, encoded=True), allow_redirects=False)
        except (aiohttp.ClientError, OSError) as exc:
            raise translate(exc, _peer(target)) from None

    async def _read(
        self, final: Target, response: aiohttp.ClientResponse, redirects: int, observer: Observer | None
    ) -> Fetched:
        if not 200 <= response.status < 300:
            if observer is not None:
                await _read_evidence(response, observer)
            raise HttpStatus(
                f"the server answered HTTP {response.status}",
                status=response.status,
                retry_after_s=retry_after_s(response.headers.get("Retry-After")),
            )
        content_type = response.headers.get("Content-Type")
        kind = declared_kind(content_type)
        if kind is DeclaredKind.BINARY:
            raise UnsupportedContentType(f"the page is {_essence(content_type)}, neither text nor a PDF")
        if kind in WHOLE:
            self._refuse_declared_oversize(response)
        body, truncated = await self._read_body(final, response, kind, observer)
        cache_control = ", ".join(response.headers.getall("Cache-Control", [])) or None
        language = response.headers.get("Content-Language")
        return Fetched(
            final, response.status, content_type, body, truncated, redirects, cache_control, language
        )

    def _refuse_declared_oversize(self, response: aiohttp.ClientResponse) -> None:
        declared = response.content_length
        if declared is not None and declared > self.limits.max_pdf_bytes:
            raise UnsupportedContentType(_pdf_too_large(self.limits.max_pdf_bytes, declared))

    async def _read_body(
        self, final: Target, response: aiohttp.ClientResponse, kind: DeclaredKind, observer: Observer | None
    ) -> tuple[bytes, bool]:
        """The decoded body, cut at the byte cap (a PDF over its cap is refused instead)."""
        body = _Body(kind, self.limits)
        decoder = Decoder(response.headers.get("Content-Encoding"))
        started = phases.now_ns()
        try:
            async for chunk in response.content.iter_chunked(READ_CHUNK):
                if observer is not None:
                    observer.read(chunk)
                decoder.feed(chunk)
                body.take(decoder)
                if body.over:
                    break
            else:
                body.take(decoder)
        except (aiohttp.ClientError, OSError) as exc:
            raise translate(exc, _peer(final)) from None
        except zlib.error:
            raise ConnectionFailed(
                f"the body from {_peer(final)} is not what its Content-Encoding says"
            ) from None
        if body.over:
            if body.pdf:
                raise UnsupportedContentType(_pdf_too_large(self.limits.max_pdf_bytes, None))
            response.close()  # the rest is never read; do not return this connection to the pool
        phases.record(phases.BODY, started)
        read = body.bytes()
        if observer is not None:
            observer.finished(len(read), body.over)
        return read, body.over


async def _read_evidence(response: aiohttp.ClientResponse, observer: Observer) -> None:
    """An error answer's body for the archive (a 404 page is evidence): as it came, up to
    ``EVIDENCE_BYTES`` and ``EVIDENCE_S``, so a server that stalls delays the error by no more."""
    kept = 0
    cut = False
    try:
        async with asyncio.timeout(EVIDENCE_S):
            async for chunk in response.content.iter_chunked(READ_CHUNK):
                chunk = chunk[: EVIDENCE_BYTES - kept]
                observer.read(chunk)
                kept += len(chunk)
                if kept >= EVIDENCE_BYTES:
                    cut = not response.content.at_eof()
                    break
    except (TimeoutError, aiohttp.ClientError, OSError):
        cut = True
    if cut:
        response.close()  # the rest is never read; do not return this connection to the pool
    observer.finished(kept, cut)


class _Body:
    """The decoded bytes read so far, against the cap that applies: the text cap, or the PDF cap
    once the body is declared or sniffed as a PDF."""

    def __init__(self, kind: DeclaredKind, limits: FetchLimits) -> None:
        self.pdf = kind in WHOLE
        self._limits = limits
        self.limit = limits.max_pdf_bytes if self.pdf else limits.max_bytes
        self._sniffed = kind is not DeclaredKind.UNDECLARED
        self._data = bytearray()
        self.over = False  # more decoded bytes exist than the cap allows

    def take(self, decoder: Decoder) -> None:
        """Pull decoded bytes until the decoder needs more input, or one byte past the cap."""
        while not self.over:
            wanted = self.limit - len(self._data) + 1
            out = decoder.read(min(wanted, READ_CHUNK))
            if not out:
                return
            self._data += out
            if not self._sniffed and len(self._data) >= SNIFF_BYTES:
                # An undeclared body that turns out to be a PDF (an image, an office file) is
                # read to the PDF cap instead.
                self._sniffed = True
                if looks_like_document(bytes(self._data[:SNIFF_BYTES])):
                    self.pdf, self.limit = True, self._limits.max_pdf_bytes
            self.over = len(self._data) > self.limit

    def bytes(self) -> bytes:
        return bytes(self._data[: self.limit])


# Read whole, to the PDF cap: a PDF, an image, an office document (a cut one cannot be parsed).
WHOLE = frozenset({DeclaredKind.PDF, DeclaredKind.DOCUMENT})
SNIFF_BYTES = 16  # the longest signature looks_like_document needs (WebP's RIFF....WEBP is 12)


def _pdf_too_large(cap: int, declared: int | None) -> str:
    size = f"{declared:,} bytes" if declared is not None else "more than that"
    return f"the PDF is larger than the {cap:,}-byte cap for PDFs ({size}); it was not read"


def _essence(content_type: str | None) -> str:
    essence = (content_type or "").split(";", 1)[0].strip().lower()
    # Shown to the agent: only a well-formed type name, never arbitrary header text.
    if len(essence) <= 80 and all(ch.isalnum() or ch in "/+-._" for ch in essence):
        return essence
    return "a type that is not text"


def refused_redirect(current: Target, refusal: GuardianRefusal) -> GuardianRefusal:
    """The same refusal, naming the hop: the agent learns the redirect was refused, not its first URL."""
    return refusal.with_message(f"the redirect from {_peer(current)} was refused: {refusal.message}")


def _peer(target: Target) -> str:
    host = f"[{target.host}]" if ":" in target.host else target.host
    return host if target.port == 443 else f"{host}:{target.port}"
