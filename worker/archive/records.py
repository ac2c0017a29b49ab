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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from isal import isal_zlib
from warcio.statusandheaders import StatusAndHeaders
from warcio.utils import Digester
from warcio.warcwriter import WARCWriter

from worker.archive.capture import RENAMED, Capture, Hop
from worker.archive.ids import new_record_id

WARC_VERSION = "1.1"
# warcio's own wrapper compresses at 9 with zlib. The CPU is the worker's, shared with reading
# pages, while the bytes are the store's (and a repeated page is a revisit anyway): ISA-L's deflate
# at level 1 (isal) makes the same gzip members about three times faster than zlib's level 1, at
# zlib 1's size or smaller (the bench's pages: 0.21 ms a page against 0.66 ms, 21 % of the bytes).
GZIP_LEVEL = 1
SOFTWARE = "research-worker"
RENAMED_LENGTH = RENAMED + b"Content-Length:"
FORMAT = "WARC File Format 1.1"
CONFORMS_TO = "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"


@dataclass(frozen=True)
class Stamp:
    """Where a file's records come from: its report and job (``WARC-Research-Report``,
    ``WARC-Research-Job`` on every record) and what the ``warcinfo`` that opens it says."""

    report_id: str
    job_id: str | None
    info: Mapping[str, str]  # warcinfo fields (software, operator, user agent, robots policy)


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


def fetch_file(
    capture: Capture,
    final_id: str,
    stamp: Stamp,
    original: Original | None = None,
    digest: str | None = None,
) -> bytes:
    """A ``warcinfo``, then every hop of a fetch as request/response pairs; the last response has
    ``final_id``, and is a revisit of ``original`` when that is given (the same payload, stored once).
    ``digest``, the final payload's (``payload_digest``) when the writer took it already, is not
    taken again."""
    out = io.BytesIO()
    info_id = _warcinfo(out, final_id, stamp)
    for position, hop in enumerate(capture.hops):
        last = position == len(capture.hops) - 1
        response_id = final_id if last else new_record_id()
        known = digest if last else None
        if last and original is not None:
            response = _revisit(hop, response_id, original, stamp, info_id, known)
        else:
            response = _response(hop, response_id, stamp, info_id, known)
        _write(out, response)
        _write(out, _request(hop, response_id, stamp, info_id))
    return out.getvalue()


def rendered_file(
    capture: Capture,
    final_id: str,
    stamp: Stamp,
    dom: bytes,
    original: Original | None = None,
    digest: str | None = None,
) -> bytes:
    """A render's document exchange (as ``fetch_file``), then the text the browser read (the
    serialized DOM after its scripts ran) as a ``conversion`` record that refers to the response."""
    out = io.BytesIO()
    out.write(fetch_file(capture, final_id, stamp, original, digest))
    final = capture.final
    headers = _stamped(stamp, None)
    headers.update(
        {
            "WARC-Record-ID": f"<{new_record_id()}>",
            "WARC-Date": warc_date(final.at if final is not None else dt.datetime.now(dt.UTC)),
            "WARC-Refers-To": f"<{final_id}>",
        }
    )
    conversion = _builder().create_warc_record(
        final.url if final is not None else "",
        "conversion",
        payload=io.BytesIO(dom),
        length=len(dom),
        warc_content_type="text/html; charset=utf-8",
        warc_headers_dict=headers,
    )
    _write(out, conversion)
    return out.getvalue()


def screenshot_file(record_id: str, page_url: str, at: dt.datetime, png: bytes, stamp: Stamp) -> bytes:
    """A screenshot of a rendered page: a ``resource`` record (``image/png``) whose URI is the page's
    with ``urn:view:`` before it, the name web archive crawlers give a page's screenshot."""
    out = io.BytesIO()
    info_id = _warcinfo(out, record_id, stamp)
    headers = _stamped(stamp, info_id)
    headers.update({"WARC-Record-ID": f"<{record_id}>", "WARC-Date": warc_date(at)})
    resource = _builder().create_warc_record(
        f"urn:view:{page_url}",
        "resource",
        payload=io.BytesIO(png),
        length=len(png),
        warc_content_type="image/png",
        warc_headers_dict=headers,
    )
    _write(out, resource)
    return out.getvalue()


def _stamped(stamp: Stamp, info_id: str | None) -> dict[str, str]:
    headers = {"WARC-Research-Report": _printable(stamp.report_id)}
    if stamp.job_id:
        headers["WARC-Research-Job"] = _printable(stamp.job_id)
    if info_id is not None:
        headers["WARC-Warcinfo-ID"] = f"<{info_id}>"
    return headers


def _common(hop: Hop, record_id: str, stamp: Stamp, info_id: str) -> dict[str, str]:
    headers = {"WARC-Record-ID": f"<{record_id}>", "WARC-Date": warc_date(hop.at), **_stamped(stamp, info_id)}
    if hop.peer is not None:
        headers["WARC-IP-Address"] = hop.peer
    return headers


def _response(hop: Hop, record_id: str, stamp: Stamp, info_id: str, digest: str | None) -> Any:
    headers = _common(hop, record_id, stamp, info_id)
    if hop.truncated is not None:
        headers["WARC-Truncated"] = hop.truncated
    if digest is not None:
        headers["WARC-Payload-Digest"] = digest  # warcio takes only the block's then
    body = hop.body()
    return _builder().create_warc_record(
        hop.url,
        "response",
        payload=io.BytesIO(body),
        length=len(body),
        http_headers=_RawHead(kept_length(hop.response_head, len(body))),
        warc_headers_dict=headers,
    )


def _revisit(
    hop: Hop, record_id: str, original: Original, stamp: Stamp, info_id: str, digest: str | None
) -> Any:
    headers = _common(hop, record_id, stamp, info_id)
    headers["WARC-Refers-To"] = f"<{original.record}>"
    body = hop.body()
    return _builder().create_revisit_record(
        hop.url,
        digest or payload_digest(body),
        original.uri,
        original.date,
        http_headers=_RawHead(kept_length(hop.response_head, len(body))),
        warc_headers_dict=headers,
    )


def _request(hop: Hop, response_id: str, stamp: Stamp, info_id: str) -> Any:
    headers = _common(hop, new_record_id(), stamp, info_id)
    headers["WARC-Concurrent-To"] = f"<{response_id}>"
    return _builder().create_warc_record(
        hop.url,
        "request",
        payload=io.BytesIO(b""),
        length=0,
        http_headers=_RawHead(hop.request_head),
        warc_headers_dict=headers,
    )


def kept_length(head: bytes, kept: int) -> bytes:
    """The response head with a ``Content-Length`` that says the bytes kept: a replay tool sends
    the stored head and then the payload, and a client told more bytes than follow waits for them
    (a body cut at the cap, a redirect or an error whose body was not read). The server's value is
    kept under ``X-Archive-Orig-Content-Length``. A head that says ``kept``, or no length at all
    (the record's end is the body's), is left exactly as received."""
    lines = head.split(b"\r\n")
    declared = [i for i, line in enumerate(lines) if line[:15].lower() == b"content-length:"]
    if not declared or (len(declared) == 1 and lines[declared[0]][15:].strip() == str(kept).encode()):
        return head
    for i in declared:
        lines[i] = RENAMED_LENGTH + lines[i][15:]
    end = len(lines)
    while end > 1 and lines[end - 1] == b"":
        end -= 1
    lines.insert(end, b"Content-Length: " + str(kept).encode())
    return b"\r\n".join(lines)


def search_file(
    record_id: str,
    stamp: Stamp,
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
    info_id = _warcinfo(out, record_id, stamp)
    date = warc_date(at)
    resource = _builder().create_warc_record(
        endpoint,
        "resource",
        payload=io.BytesIO(answer),
        length=len(answer),
        warc_content_type=_printable(content_type) or "application/octet-stream",
        warc_headers_dict={"WARC-Record-ID": f"<{record_id}>", "WARC-Date": date, **_stamped(stamp, info_id)},
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
            **_stamped(stamp, info_id),
        },
    )
    _write(out, metadata)
    return out.getvalue()


def warcinfo(filename: str, fields: Mapping[str, str], stamp: Stamp | None = None) -> bytes:
    """A ``warcinfo`` record on its own: what wrote the file and what it holds (an export's first)."""
    out = io.BytesIO()
    _write(out, _warcinfo_record(new_record_id(), filename, fields, stamp))
    return out.getvalue()


def _warcinfo(out: io.BytesIO, file_id: str, stamp: Stamp) -> str:
    """The ``warcinfo`` that opens a stored file (named after the record id its key comes from)."""
    info_id = new_record_id()
    name = file_id.removeprefix("urn:uuid:") + ".warc.gz"
    _write(out, _warcinfo_record(info_id, name, stamp.info, stamp))
    return info_id


def _warcinfo_record(info_id: str, filename: str, fields: Mapping[str, str], stamp: Stamp | None) -> Any:
    body = {"software": SOFTWARE, "format": FORMAT, "conformsTo": CONFORMS_TO, **fields}
    text = "".join(f"{name}: {_printable(value)}\r\n" for name, value in body.items() if value)
    payload = text.encode("utf-8")
    headers = {
        "WARC-Record-ID": f"<{info_id}>",
        "WARC-Date": warc_date(dt.datetime.now(dt.UTC)),
        "WARC-Filename": filename,
    }
    if stamp is not None:
        headers.update(_stamped(stamp, None))
    return _builder().create_warc_record(
        "",
        "warcinfo",
        payload=io.BytesIO(payload),
        length=len(payload),
        warc_content_type="application/warc-fields",
        warc_headers_dict=headers,
    )


def _printable(text: str) -> str:
    return "".join(ch for ch in text if ch.isprintable())[:200]


def _builder() -> WARCWriter:
    return WARCWriter(io.BytesIO(), gzip=False, warc_version=WARC_VERSION)


def _write(out: io.BytesIO, record: Any) -> None:
    plain = io.BytesIO()
    WARCWriter(plain, gzip=False, warc_version=WARC_VERSION).write_record(record)
    compressor = isal_zlib.compressobj(GZIP_LEVEL, isal_zlib.DEFLATED, isal_zlib.MAX_WBITS | 16)
    out.write(compressor.compress(plain.getbuffer()))
    out.write(compressor.flush())
