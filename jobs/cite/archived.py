"""A report's fetched documents read back from the evidence archive, once their kept text is gone.

The report's index (``worker.archive.index``) names the records its results cited; each names a
file that holds a fetch's hops (request and response per hop, the last response the one cited),
so a URL is found among the hops' target URIs (the URL asked for, or one it redirected through)
and its document is the file's last response: its payload as stored, its content coding undone
as the fetcher undid it (``jobs.decoding``), cut where the fetch was cut. A revisit's payload is
its original's, in another file. Only the store is read: never the network.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import logging
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed

from jobs.decoding import Decoder
from jobs.reader.document import reads_in_child
from worker.archive import index
from worker.archive.ids import file_key, parse_record_id
from worker.archive.store import Store, StoreFailed
from worker.errors import UnsupportedContentType
from worker.guardian.urls import canonical_url
from worker.logs import fields

if TYPE_CHECKING:
    from redis.asyncio import Redis

log = logging.getLogger("research.cite")

# Decoded a step at a time, never past the larger cap and a step (a bomb stops there).
DECODE_STEP = 1 << 16


@dataclass(frozen=True)
class ArchivedBody:
    """A fetched document's body as the reader got it, and what its record says of it."""

    record: str  # the cited response's record id
    url: str  # its target URI (the final hop's URL)
    body: bytes
    content_type: str | None
    content_language: str | None
    truncated: bool
    fetched_at: str  # the record's WARC-Date, to the second

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.body).hexdigest()


@dataclass(frozen=True)
class _Response:
    record: str
    uri: str
    refers_to: str | None  # a revisit's original
    date: str
    http: Any  # warcio's StatusAndHeaders
    payload: bytes | None  # None for a revisit
    truncated: bool


class ArchivedReport:
    """One report's archive, read lazily and at most once per file for one job."""

    def __init__(
        self, redis: Redis, store: Store, report_id: str, *, max_bytes: int, max_pdf_bytes: int
    ) -> None:
        self._redis = redis
        self._store = store
        self._report = report_id
        self._max_bytes = max_bytes
        self._max_decoded = max(max_bytes, max_pdf_bytes) + DECODE_STEP
        self._by_url: dict[str, str] = {}
        self._pending: list[str] | None = None  # cited records not read yet, the next one last
        self._files: dict[str, list[_Response]] = {}

    async def body(self, url: str) -> ArchivedBody | None:
        """The document the report fetched for ``url`` (canonical), or None when not archived."""
        record = await self._record_for(url)
        if record is None:
            return None
        response = await self._response(record)
        if response is None:
            return None
        payload, truncated = response.payload, response.truncated
        if response.refers_to is not None:
            original = await self._response(response.refers_to)
            if original is None or original.payload is None:
                return None
            payload, truncated = original.payload, original.truncated
        if payload is None:
            return None
        headers = response.http
        content_type = headers.get_header("Content-Type") if headers is not None else None
        try:
            encoding = headers.get_header("Content-Encoding") if headers else None
            body = _decoded(payload, encoding, self._max_decoded)
        except (UnsupportedContentType, zlib.error):
            return None
        if truncated and not reads_in_child(body, content_type):
            body = body[: self._max_bytes]  # a compressed body was kept as read: past the cap
        return ArchivedBody(
            record=response.record,
            url=response.uri,
            body=body,
            content_type=content_type,
            content_language=headers.get_header("Content-Language") if headers else None,
            truncated=truncated,
            fetched_at=response.date,
        )

    async def _record_for(self, url: str) -> str | None:
        """The record of the fetch that asked for or went through ``url``: the report's files are
        read in the order cited, each once, only until the URL is found."""
        if self._pending is None:
            self._pending = list(reversed(await index.cited(self._redis, self._report)))
        while url not in self._by_url and self._pending:
            record = self._pending.pop()
            responses = await self._read(record, payloads=False)  # the one wanted is read again whole
            if not responses or responses[-1].record != record:
                continue  # a search's answer, or a file that is gone
            for response in responses:
                self._by_url.setdefault(canonical_url(response.uri) or response.uri, record)
        return self._by_url.get(url)

    async def _response(self, record: str) -> _Response | None:
        for response in await self._file(record):
            if response.record == record:
                return response
        return None

    async def _file(self, record: str) -> list[_Response]:
        if record not in self._files:
            self._files[record] = await self._read(record)
        return self._files[record]

    async def _read(self, record: str, *, payloads: bool = True) -> list[_Response]:
        try:
            data = b"".join([chunk async for chunk in self._store.stream(file_key(record))])
        except StoreFailed as failed:
            log.info("an archived record's file is gone", extra=fields(record=record, reason=failed.reason))
            return []
        try:
            return _responses(data, payloads)
        except (ArchiveLoadFailed, ValueError, zlib.error, EOFError) as exc:
            log.warning(
                "an archived file could not be read", extra=fields(record=record, error=type(exc).__name__)
            )
            return []


def _responses(data: bytes, payloads: bool) -> list[_Response]:
    found: list[_Response] = []
    for record in ArchiveIterator(io.BytesIO(data)):
        if record.rec_type not in ("response", "revisit"):
            continue
        headers = record.rec_headers
        record_id = parse_record_id(str(headers.get_header("WARC-Record-ID") or "").strip("<>"))
        if record_id is None:
            continue
        refers = headers.get_header("WARC-Refers-To")
        found.append(
            _Response(
                record=record_id,
                uri=str(headers.get_header("WARC-Target-URI") or ""),
                refers_to=parse_record_id(str(refers).strip("<>")) if refers else None,
                date=_second(str(headers.get_header("WARC-Date") or "")),
                http=record.http_headers,
                payload=record.raw_stream.read() if payloads and record.rec_type == "response" else None,
                truncated=bool(headers.get_header("WARC-Truncated")),
            )
        )
    return found


def _decoded(payload: bytes, content_encoding: str | None, limit: int) -> bytes:
    decoder = Decoder(content_encoding)
    decoder.feed(payload)
    out = bytearray()
    while len(out) < limit and (piece := decoder.read(DECODE_STEP)):
        out += piece
    return bytes(out[:limit])


def _second(warc_date: str) -> str:
    """A WARC-Date (microseconds) as results write ``fetched_at``: to the second, UTC."""
    try:
        at = dt.datetime.fromisoformat(warc_date.replace("Z", "+00:00"))
    except ValueError:
        return warc_date
    return at.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
