"""What travels between the worker and a PDF child over its pipes: length-prefixed frames.

A request is a fixed header (the character cap, the CPU budget and limit, the body's length) and
the PDF's bytes; a reply is one orjson object. The worker reads a reply as untrusted input: a child
that a hostile PDF took over could write anything, so a reply that is too long, not JSON, or not
the shape below is a failure of that one job, never of the worker.
"""

from __future__ import annotations

import os
import struct
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

import orjson

REQUEST_HEAD = struct.Struct(">IddQI")  # max_chars, cpu_budget_s, cpu_limit_s, body length, options length
MAX_OPTIONS_BYTES = 4096
REPLY_HEAD = struct.Struct(">I")
# Text is cut near the character cap and URIs are capped in the child, so a true reply is far
# smaller; a longer one is refused unread.
MAX_REPLY_BYTES = 64 * 1024 * 1024
MAX_DECLARED_KEYS = 32
MAX_DECLARED_VALUES = 20
MAX_DECLARED_CHARS = 4000


class Refusal(StrEnum):
    """Why a document cannot be read at all; the worker words the message for each."""

    PASSWORD = "password"  # noqa: S105 (encrypted with a password we do not have)
    SECURITY = "security"  # encrypted with a scheme PDFium does not support
    DAMAGED = "damaged"  # not parsable as a PDF, or none of its pages loads
    IMAGE_DAMAGED = "image_damaged"  # an image that cannot be decoded
    IMAGE_TOO_LARGE = "image_too_large"  # an image whose header declares more pixels than the bound
    OFFICE_DAMAGED = "office_damaged"  # not a readable office document (zip or XML broken)
    ZIP_BOMB = "zip_bomb"  # an archive member inflating past its ratio or the total bound
    XML_ENTITIES = "xml_entities"  # a DTD or entity declaration in the document's XML
    OCR_OFF = "ocr_off"  # an image, with OCR turned off


class Kind(StrEnum):
    """What the child is asked to read."""

    PDF = "pdf"
    IMAGE = "image"
    OFFICE = "office"


class PdfRefused(Exception):
    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.value)
        self.refusal = refusal


@dataclass
class Reading:
    """What the child sends back for a PDF it could open."""

    pages: int  # the document's page count
    pages_read: int  # pages whose text was extracted, in order from the first
    title: str  # the metadata title, cleaned; "" when there is none
    texts: list[str] = field(default_factory=list)  # one per page read, cleaned, possibly ""
    uris: list[list[str]] = field(default_factory=list)  # link-annotation URIs, one list per page read
    hidden_removed: int = 0
    characters: int = 0  # characters of text layer seen on the pages read, hidden ones included
    images: int = 0  # image objects seen on the pages read
    complete: bool = True  # False when the CPU budget stopped the reading early
    unreadable_pages: int = 0  # pages PDFium could not load
    declared: dict[str, list[str]] = field(default_factory=dict)  # metadata.xmp's raw declarations
    ocr_pages: list[int] = field(default_factory=list)  # page numbers (from 1) read by OCR
    ocr_confidence: list[float] = field(default_factory=list)  # each OCR'd page's mean word confidence
    ocr_unread: list[int] = field(default_factory=list)  # pages OCR did not reach: page budget or time
    ocr_engine: str = ""  # "tesseract 5.x" when OCR read any page
    markdown: str = ""  # an office document: its Markdown (texts holds its plain text)
    hazards: list[str] = field(default_factory=list)  # what was refused and ignored (macros, links out)


@dataclass(frozen=True)
class Options:
    """How to read: what the body is, and what OCR may spend on it."""

    kind: Kind = Kind.PDF
    ocr_pages: int = 0  # pages OCR may read (0: none); the report's OCR budget, what is left of it
    ocr_budget_s: float = 0.0  # CPU time OCR may spend, beyond the text layer's budget
    from_page: int = 0  # the first page (from 0) to read: a continuation reads where the first fetch left off

    def encode(self) -> bytes:
        return orjson.dumps(asdict(self))


@dataclass(frozen=True)
class Request:
    body: bytes
    max_chars: int
    cpu_budget_s: float  # the reading stops between pages once it has used this much CPU time
    cpu_limit_s: float  # the kernel stops the child at this much CPU time for the one document
    options: Options = Options()

    def frame(self) -> bytes:
        options = self.options.encode()
        head = REQUEST_HEAD.pack(
            self.max_chars, self.cpu_budget_s, self.cpu_limit_s, len(self.body), len(options)
        )
        return head + options + self.body


class WireError(Exception):
    """A frame that is cut short, too long or malformed."""


def read_exactly(fd: int, size: int) -> bytes | None:
    """``size`` bytes from ``fd``; None at end of file before the first byte."""
    chunks: list[bytes] = []
    remaining = size
    while remaining:
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            if not chunks and remaining == size:
                return None
            raise WireError("the frame was cut short")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def read_request(fd: int) -> Request | None:
    """The next request on ``fd``, or None when the worker has closed the pipe."""
    head = read_exactly(fd, REQUEST_HEAD.size)
    if head is None:
        return None
    max_chars, cpu_budget_s, cpu_limit_s, length, options_length = REQUEST_HEAD.unpack(head)
    if options_length > MAX_OPTIONS_BYTES:
        raise WireError("the request's options are over their bound")
    options = read_exactly(fd, options_length) if options_length else b"{}"
    body = read_exactly(fd, length) if length else b""
    if body is None or options is None:
        raise WireError("the request ended before its body")
    return Request(body, max_chars, cpu_budget_s, cpu_limit_s, _options(options))


def _options(data: bytes) -> Options:
    """The worker wrote these; still, a bad value is a wire error, not a crash of the child."""
    try:
        fields = orjson.loads(data)
        return Options(
            kind=Kind(fields.get("kind", "pdf")),
            ocr_pages=int(fields.get("ocr_pages", 0)),
            ocr_budget_s=float(fields.get("ocr_budget_s", 0.0)),
            from_page=int(fields.get("from_page", 0)),
        )
    except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError):
        raise WireError("the request's options are malformed") from None


def reply_frame(reply: Reading | Refusal) -> bytes:
    payload = {"refused": reply.value} if isinstance(reply, Refusal) else {"reading": asdict(reply)}
    data = orjson.dumps(payload)
    return REPLY_HEAD.pack(len(data)) + data


def reply_length(head: bytes) -> int:
    (length,) = REPLY_HEAD.unpack(head)
    if length > MAX_REPLY_BYTES:
        raise WireError(f"a reply of {length:,} bytes is over the {MAX_REPLY_BYTES:,}-byte bound")
    return int(length)


def parse_reply(data: bytes) -> Reading | Refusal:
    """The reply as the worker trusts it: every field checked for its type."""
    try:
        payload = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise WireError("the reply is not JSON") from None
    if not isinstance(payload, dict):
        raise WireError("the reply is not an object")
    if "refused" in payload:
        try:
            return Refusal(payload["refused"])
        except ValueError:
            raise WireError("the reply names an unknown refusal") from None
    fields = payload.get("reading")
    if not isinstance(fields, dict):
        raise WireError("the reply has neither a reading nor a refusal")
    return _reading(fields)


def _reading(fields: dict[str, Any]) -> Reading:
    counts = ("pages", "pages_read", "hidden_removed", "characters", "images", "unreadable_pages")
    for name in counts:
        value = fields.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise WireError(f"the reply's {name} is not a count")
    if not isinstance(fields.get("title"), str) or not isinstance(fields.get("complete"), bool):
        raise WireError("the reply's title or completeness is malformed")
    texts = fields.get("texts")
    uris = fields.get("uris")
    if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
        raise WireError("the reply's texts are malformed")
    if not isinstance(uris, list) or not all(
        isinstance(page, list) and all(isinstance(uri, str) for uri in page) for page in uris
    ):
        raise WireError("the reply's uris are malformed")
    declared = fields.get("declared", {})
    if not _declarations(declared):
        raise WireError("the reply's declared metadata is malformed")
    ocr = _ocr_fields(fields)
    markdown = fields.get("markdown", "")
    hazards = fields.get("hazards", [])
    if not isinstance(markdown, str) or not _strings(hazards, MAX_HAZARDS):
        raise WireError("the reply's markdown or hazards are malformed")
    return Reading(
        pages=fields["pages"],
        pages_read=fields["pages_read"],
        title=fields["title"],
        texts=texts,
        uris=uris,
        hidden_removed=fields["hidden_removed"],
        characters=fields["characters"],
        images=fields["images"],
        complete=fields["complete"],
        unreadable_pages=fields["unreadable_pages"],
        declared=declared,
        markdown=markdown,
        hazards=hazards,
        **ocr,
    )


MAX_HAZARDS = 64


def _strings(value: object, most: int) -> bool:
    return (
        isinstance(value, list)
        and len(value) <= most
        and all(isinstance(item, str) and len(item) <= 500 for item in value)
    )


def _ocr_fields(fields: dict[str, Any]) -> dict[str, Any]:
    pages, unread = fields.get("ocr_pages", []), fields.get("ocr_unread", [])
    confidence, engine = fields.get("ocr_confidence", []), fields.get("ocr_engine", "")
    counts_ok = all(
        isinstance(numbers, list)
        and all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in numbers)
        for numbers in (pages, unread)
    )
    confidence_ok = isinstance(confidence, list) and all(
        isinstance(c, int | float) and not isinstance(c, bool) and 0 <= c <= 100 for c in confidence
    )
    if not counts_ok or not confidence_ok or len(confidence) != len(pages) or not isinstance(engine, str):
        raise WireError("the reply's OCR fields are malformed")
    return {
        "ocr_pages": pages,
        "ocr_unread": unread,
        "ocr_confidence": [float(c) for c in confidence],
        "ocr_engine": engine[:100],
    }


def _declarations(value: object) -> bool:
    """The shape metadata.xmp writes, within its bounds (with room: the child cuts, this checks)."""
    return (
        isinstance(value, dict)
        and len(value) <= MAX_DECLARED_KEYS
        and all(
            isinstance(key, str)
            and len(key) <= 64
            and isinstance(values, list)
            and len(values) <= MAX_DECLARED_VALUES
            and all(isinstance(item, str) and len(item) <= MAX_DECLARED_CHARS for item in values)
            for key, values in value.items()
        )
    )
