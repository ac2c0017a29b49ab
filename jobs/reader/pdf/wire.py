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

REQUEST_HEAD = struct.Struct(">IddQ")  # max_chars, cpu_budget_s, cpu_limit_s, body length
REPLY_HEAD = struct.Struct(">I")
# Text is cut near the character cap and URIs are capped in the child, so a true reply is far
# smaller; a longer one is refused unread.
MAX_REPLY_BYTES = 64 * 1024 * 1024
MAX_DECLARED_KEYS = 32
MAX_DECLARED_VALUES = 20
MAX_DECLARED_CHARS = 4000


class Refusal(StrEnum):
    """Why a PDF cannot be read at all; the worker words the message for each."""

    PASSWORD = "password"  # noqa: S105 (encrypted with a password we do not have)
    SECURITY = "security"  # encrypted with a scheme PDFium does not support
    DAMAGED = "damaged"  # not parsable as a PDF, or none of its pages loads


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


@dataclass(frozen=True)
class Request:
    body: bytes
    max_chars: int
    cpu_budget_s: float  # the reading stops between pages once it has used this much CPU time
    cpu_limit_s: float  # the kernel stops the child at this much CPU time for the one document

    def frame(self) -> bytes:
        head = REQUEST_HEAD.pack(self.max_chars, self.cpu_budget_s, self.cpu_limit_s, len(self.body))
        return head + self.body


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
    max_chars, cpu_budget_s, cpu_limit_s, length = REQUEST_HEAD.unpack(head)
    body = read_exactly(fd, length) if length else b""
    if body is None:
        raise WireError("the request ended before its body")
    return Request(body, max_chars, cpu_budget_s, cpu_limit_s)


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
    )


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
