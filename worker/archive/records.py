"""WARC 1.1 records, built with warcio: a fetch's request/response pairs, a search's answer.

Pure functions of what was captured, run in a thread by the writer (compression and digests are
CPU work the event loop must not do). Each record is its own gzip member, so a file is a valid
``.warc.gz`` and files concatenate into one (the export only joins bytes).

Headers go out as received: warcio would re-encode an HTTP head from its parsed fields (and
percent-encode bytes it finds unusual), so the head is given to it as bytes it must not recompute.
"""

from __future__ import annotations

import datetime as dt
import io
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from warcio.statusandheaders import StatusAndHeaders
from warcio.utils import Digester
from warcio.warcwriter import WARCWriter

from worker.archive.capture import Capture, Hop
from worker.archive.ids import new_record_id

WARC_VERSION = "1.1"
# warcio's own wrapper compresses at 9. A page at 1 is about a third larger than at 6 and costs a
# quarter of the CPU (1.2 ms against 5 ms for 95 KB of HTML): the CPU is the worker's, shared with
# reading pages, while the bytes are the store's, and a repeated page is a revisit anyway.
GZIP_LEVEL = 1
SOFTWARE = "research-worker"


@dataclass(frozen=True)
class Original:
    """An earlier response with the same payload: the record a revisit refers to."""

    record: str
    uri: str
    date: str  # its WARC-Date


class _RawHead(StatusAndHeaders):  # type: ignore[misc]
    """An HTTP head whose bytes are kept exactly as received."""

    def __init__(self, raw: bytes) -> None:
        first = raw.split(b"\r\n", 1)[0].decode("latin-1")
        protocol, _, statusline = first.partition(" ")
        super().__init__(statusline, [], protocol=protocol)
        self.headers_buff = raw

    def compute_headers_buffer(self, header_filter: Any = None) -> None:
        return None


def warc_date(at: dt.datetime) -> str:
    return at.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def payload_digest(body: bytes) -> str:
    """WARC-Payload-Digest as warcio writes it (``sha1:`` and base32)."""
    digester = Digester("sha1")
    digester.update(body)
    return str(digester)


def fetch_file(capture: Capture, final_id: str, original: Original | None = None) -> bytes:
    """Every hop of a fetch as request/response pairs; the last response has ``final_id``, and is
    a revisit of ``original`` when that is given (the same payload, stored once)."""
    out = io.BytesIO()
    for position, hop in enumerate(capture.hops):
        last = position == len(capture.hops) - 1
        response_id = final_id if last else new_record_id()
        if last and original is not None:
            response = _revisit(hop, response_id, original)
        else:
            response = _response(hop, response_id)
        _write(out, response)
        _write(out, _request(hop, response_id))
    return out.getvalue()


def _common(hop: Hop, record_id: str) -> dict[str, str]:
    headers = {"WARC-Record-ID": f"<{record_id}>", "WARC-Date": warc_date(hop.at)}
    if hop.peer is not None:
        headers["WARC-IP-Address"] = hop.peer
    return headers


def _response(hop: Hop, record_id: str) -> Any:
    headers = _common(hop, record_id)
    if hop.truncated is not None:
        headers["WARC-Truncated"] = hop.truncated
    body = hop.body()
    return _builder().create_warc_record(
        hop.url,
        "response",
        payload=io.BytesIO(body),
        length=len(body),
        http_headers=_RawHead(hop.response_head),
        warc_headers_dict=headers,
    )


def _revisit(hop: Hop, record_id: str, original: Original) -> Any:
    headers = _common(hop, record_id)
    headers["WARC-Refers-To"] = f"<{original.record}>"
    return _builder().create_revisit_record(
        hop.url,
        payload_digest(hop.body()),
        original.uri,
        original.date,
        http_headers=_RawHead(hop.response_head),
        warc_headers_dict=headers,
    )


def _request(hop: Hop, response_id: str) -> Any:
    headers = _common(hop, new_record_id())
    headers["WARC-Concurrent-To"] = f"<{response_id}>"
    return _builder().create_warc_record(
        hop.url,
        "request",
        payload=io.BytesIO(b""),
        length=0,
        http_headers=_RawHead(hop.request_head),
        warc_headers_dict=headers,
    )


def search_file(
    record_id: str,
    *,
    endpoint: str,
    at: dt.datetime,
    content_type: str,
    answer: bytes,
    summary: Mapping[str, Any],
) -> bytes:
    """The provider's answer as received (a ``resource``), and what the search returned from it
    (a ``metadata`` record that refers to the answer). The request is not kept: it carries the key."""
    out = io.BytesIO()
    date = warc_date(at)
    resource = _builder().create_warc_record(
        endpoint,
        "resource",
        payload=io.BytesIO(answer),
        length=len(answer),
        warc_content_type=_printable(content_type) or "application/octet-stream",
        warc_headers_dict={"WARC-Record-ID": f"<{record_id}>", "WARC-Date": date},
    )
    _write(out, resource)
    returned = orjson.dumps(summary)
    metadata = _builder().create_warc_record(
        endpoint,
        "metadata",
        payload=io.BytesIO(returned),
        length=len(returned),
        warc_content_type="application/json",
        warc_headers_dict={
            "WARC-Record-ID": f"<{new_record_id()}>",
            "WARC-Date": date,
            "WARC-Refers-To": f"<{record_id}>",
        },
    )
    _write(out, metadata)
    return out.getvalue()


def warcinfo(filename: str, fields: Mapping[str, str]) -> bytes:
    """The first record of an export: what wrote it and what it holds."""
    out = io.BytesIO()
    builder = _builder()
    _write(out, builder.create_warcinfo_record(filename, {"software": SOFTWARE, **fields}))
    return out.getvalue()


def _printable(text: str) -> str:
    return "".join(ch for ch in text if ch.isprintable())[:200]


def _builder() -> WARCWriter:
    return WARCWriter(io.BytesIO(), gzip=False, warc_version=WARC_VERSION)


def _write(out: io.BytesIO, record: Any) -> None:
    plain = io.BytesIO()
    WARCWriter(plain, gzip=False, warc_version=WARC_VERSION).write_record(record)
    compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    out.write(compressor.compress(plain.getbuffer()))
    out.write(compressor.flush())
