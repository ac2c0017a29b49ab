"""What a response declares it is, and what an undeclared body turns out to be (WHATWG MIME sniffing).

The fetch refuses a declared binary type before reading the body; a body with no usable declaration
is read and sniffed here, because a server that sends no Content-Type could be sending anything: a
PDF, an image, a zip. Only text reaches the reducer, and only a PDF reaches the PDF reader.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum


class DeclaredKind(Enum):
    TEXT = "text"  # read it
    PDF = "pdf"  # read it whole, up to the PDF cap
    DOCUMENT = "document"  # an image or an office document: read whole, up to the PDF cap
    BINARY = "binary"  # refuse before reading
    UNDECLARED = "undeclared"  # read, then sniff


# RFC 9110 token characters: what a type, a subtype and a parameter name are made of.
_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"  # noqa: S105 (a grammar, not a secret)
_ESSENCE = re.compile(rf"\s*({_TOKEN})/({_TOKEN})\s*")
_PARAMETER = re.compile(rf"\s*({_TOKEN})\s*=\s*(\"(?:[^\"\\]|\\.)*\"?|[^;]*)")

_TEXT_APPLICATION = frozenset(
    {
        "application/json",
        "application/xml",
        "application/xhtml+xml",
        "application/rss+xml",
        "application/atom+xml",
        "application/rss",
        "application/x-rss+xml",
    }
)
# WHATWG treats these as no declaration at all and sniffs the body; so do we.
_UNKNOWN = frozenset({"unknown/unknown", "application/unknown", "*/*"})

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
PDF_TYPES = frozenset({"application/pdf", "application/x-pdf"})
PDF = "application/pdf"
PDF_SIGNATURE = b"%PDF-"
# Images read by OCR, and office documents read as Markdown: in the PDF child, like a PDF.
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/pjpeg", "image/tiff", "image/webp", "image/gif"})
OFFICE_TYPES = frozenset(
    {
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "application/vnd.ms-word.document.macroenabled.12",
        "application/vnd.ms-excel.sheet.macroenabled.12",
        "application/vnd.ms-powerpoint.presentation.macroenabled.12",
        "application/vnd.oasis.opendocument.text",
        "application/vnd.oasis.opendocument.spreadsheet",
        "application/vnd.oasis.opendocument.presentation",
    }
)
# What an undeclared body sniffed as one of these is read as: an office document is a zip.
SNIFFED_OFFICE = "application/zip"


@dataclass(frozen=True)
class MimeType:
    essence: str  # "type/subtype", lower-case
    charset: str | None  # the charset parameter as given, unquoted, or None


def parse_content_type(header: str | None) -> MimeType | None:
    """The header's MIME type, or None when it is missing, empty or unparsable.

    A header that repeats the field (``text/html, text/html``) keeps the last valid type, as the
    WHATWG "extract a MIME type" algorithm does; a comma inside a quoted parameter is not supported.
    """
    if not header:
        return None
    found: MimeType | None = None
    for part in header.split(","):
        parsed = _parse_one(part)
        if parsed is None:
            continue
        if found is not None and parsed.charset is None and parsed.essence == found.essence:
            parsed = MimeType(parsed.essence, found.charset)
        found = parsed
    return found


def _parse_one(value: str) -> MimeType | None:
    essence_part, _, params = value.partition(";")
    match = _ESSENCE.fullmatch(essence_part)
    if match is None:
        return None
    essence = f"{match.group(1)}/{match.group(2)}".lower()
    charset = None
    for param in params.split(";"):
        pm = _PARAMETER.match(param)
        if pm is None or pm.group(1).lower() != "charset":
            continue
        raw = pm.group(2).strip()
        if raw.startswith('"'):
            raw = re.sub(r"\\(.)", r"\1", raw[1:].rstrip('"'))
        if raw and charset is None:
            charset = raw
    return MimeType(essence, charset)


def is_text_essence(essence: str) -> bool:
    return (
        essence.startswith("text/")
        or essence in _TEXT_APPLICATION
        or essence.endswith("+json")
        or essence.endswith("+xml")
    )


def declared_kind(content_type: str | None) -> DeclaredKind:
    parsed = parse_content_type(content_type)
    if parsed is None or parsed.essence in _UNKNOWN:
        return DeclaredKind.UNDECLARED
    if parsed.essence in PDF_TYPES:
        return DeclaredKind.PDF
    if parsed.essence in IMAGE_TYPES or parsed.essence in OFFICE_TYPES:
        return DeclaredKind.DOCUMENT
    return DeclaredKind.TEXT if is_text_essence(parsed.essence) else DeclaredKind.BINARY


def looks_like_pdf(body: bytes) -> bool:
    """WHATWG's PDF signature, at the very start of the body."""
    return body.startswith(PDF_SIGNATURE)


def looks_like_document(head: bytes) -> bool:
    """An undeclared body read whole like a PDF: a PDF, an image OCR reads, or a zip (an office file)."""
    sniffed = sniff(head)
    return sniffed in (PDF, SNIFFED_OFFICE) or sniffed in IMAGE_TYPES


# WHATWG MIME Sniffing, "rules for identifying an unknown MIME type", with the sniff-scriptable flag
# set: the body may be HTML. Each entry: (pattern, mask, leading whitespace ignored, MIME type).
_WS = b"\t\n\x0c\r "
_HTML_TAGS = (
    b"<!DOCTYPE HTML",
    b"<HTML",
    b"<HEAD",
    b"<SCRIPT",
    b"<IFRAME",
    b"<H1",
    b"<DIV",
    b"<FONT",
    b"<TABLE",
    b"<A",
    b"<STYLE",
    b"<TITLE",
    b"<B",
    b"<BODY",
    b"<BR",
    b"<P",
)
_BINARY_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (PDF_SIGNATURE, PDF),
    (b"%!PS-Adobe-", "application/postscript"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"BM", "image/bmp"),
    (b"\x00\x00\x01\x00", "image/x-icon"),
    (b"\x00\x00\x02\x00", "image/x-icon"),
    (b"OggS\x00", "application/ogg"),
    (b"MThd\x00\x00\x00\x06", "audio/midi"),
    (b"ID3", "audio/mpeg"),
    (b"\x1a\x45\xdf\xa3", "video/webm"),
    (b"\x1f\x8b\x08", "application/x-gzip"),
    (b"PK\x03\x04", "application/zip"),
    (b"Rar!\x1a\x07\x00", "application/x-rar-compressed"),
    (b"wOFF", "font/woff"),
    (b"wOF2", "font/woff2"),
    (b"\x00\x01\x00\x00", "font/ttf"),
    (b"OTTO", "font/otf"),
    (b"ttcf", "font/collection"),
)
# Bytes that never occur in text: their presence in the first 1,445 bytes means binary.
_BINARY_BYTES = re.compile(rb"[\x00-\x08\x0b\x0e-\x1a\x1c-\x1f]")
_SNIFF_LENGTH = 1445


def sniff(body: bytes) -> str:
    """The MIME type WHATWG's unknown-type rules give ``body``; ``is_text_essence`` says if it is text."""
    head = body[:_SNIFF_LENGTH]
    stripped = head.lstrip(_WS)
    upper = stripped[:16].upper()
    for tag in _HTML_TAGS:
        # A tag must end with a space or ">" to count: "<Bob" is not <b>.
        if upper.startswith(tag) and stripped[len(tag) : len(tag) + 1] in (b" ", b">"):
            return "text/html"
    if stripped.startswith(b"<!--"):
        return "text/html"
    if stripped.startswith(b"<?xml"):
        return "text/xml"
    if head.startswith((b"\xfe\xff", b"\xff\xfe", b"\xef\xbb\xbf")):
        return "text/plain"
    for signature, mime in _BINARY_SIGNATURES:
        if head.startswith(signature):
            return mime
    container = _riff_or_box(head)
    if container is not None:
        return container
    if _BINARY_BYTES.search(head):
        return "application/octet-stream"
    return "text/plain"


def _riff_or_box(head: bytes) -> str | None:
    if head[:4] == b"RIFF" and head[8:12] in (b"WEBP", b"WAVE", b"AVI "):
        return {b"WEBP": "image/webp", b"WAVE": "audio/wave", b"AVI ": "video/avi"}[head[8:12]]
    if head[4:8] == b"ftyp":
        return "video/mp4"
    return None


def apache_bug_binary(content_type: str | None, body: bytes) -> bool:
    """True when a text/plain label is Apache's old default and the body is in fact binary.

    WHATWG sniffs exactly these four header values because servers sent them for every file they
    had no type for; a PDF served that way would otherwise come back as pages of mojibake.
    """
    if content_type is None or content_type.strip() not in _APACHE_DEFAULTS:
        return False
    head = body[:_SNIFF_LENGTH]
    if head.startswith((b"\xfe\xff", b"\xff\xfe", b"\xef\xbb\xbf")):
        return False
    return _BINARY_BYTES.search(head) is not None


_APACHE_DEFAULTS = frozenset(
    {
        "text/plain",
        "text/plain; charset=ISO-8859-1",
        "text/plain; charset=iso-8859-1",
        "text/plain; charset=UTF-8",
    }
)
