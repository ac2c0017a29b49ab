"""What the shared page cache holds and what a flight hands its waiters, as orjson.

An entry is a reduced page (everything a fetch_page result says about the page, plus the redirect
hops to other sites it went through, which each reader re-checks against its own menu), or, when
the fetch kept the page's whole document in the same step, only the name of that document and the
hops (``KeptPage``): the document holds the page's record and its text, so the text is stored once.
Or a failure: a brief 404 or 410, or the outcome of a fetch that waiters share. A flight abandoned
by its fetcher (a report-specific refusal, a crash) says only that, so a waiter fetches instead.

Entries are written by workers, but Redis is shared state, so reading one never trusts its shape:
anything unexpected is no entry at all (a miss), never an exception. The format carries a version;
a worker that finds another version treats it as a miss and overwrites it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from types import UnionType
from typing import Any, TypeVar, get_args, get_origin, get_type_hints

import orjson

from worker.archive.ids import parse_record_id
from worker.document_notes import OcrNote, parse_ocr, parse_refused
from worker.errors import (
    ConnectionFailed,
    DestinationBlocked,
    DnsFailure,
    ErrorKind,
    GuardianRefusal,
    HttpStatus,
    RateLimited,
    ResearchError,
    SchemeNotAllowed,
    Timeout,
    TooManyRedirects,
    UnsupportedContentType,
)
from worker.guardian.reasons import Reason
from worker.page_metadata import PageMetadata
from worker.page_metadata import parse as parse_metadata

VERSION = 1

# A hop to another site: (the URL that redirected, the URL it redirected to), both canonical.
Hop = tuple[str, str]

# How a field of the page is marked, in its declaration's metadata: the page cache's own (never in
# a result), left out of a result while it is None, or read by a check of its own (a value, or BAD).
CACHE_ONLY = "cache_only"
WHEN_SET = "when_set"
READ = "read"
BAD = object()
T = TypeVar("T")
_HEX_64 = re.compile("[0-9a-f]{64}")


def _sha256(value: object) -> object:
    # An entry from a worker before the archive has none: a miss, fetched again with its hash.
    return value if isinstance(value, str) and (value == "" or _HEX_64.fullmatch(value)) else BAD


def _digest(value: object) -> object:
    return value if isinstance(value, str) and _HEX_64.fullmatch(value) else BAD


def _record_id(value: object) -> object:
    return value if value is None or parse_record_id(value) is not None else BAD


def _metadata(value: object) -> object:
    # An entry written before pages carried metadata has no "metadata" key: a miss, so that a hit
    # on an HTML page or a PDF always returns it.
    return None if value is None else parse_metadata(value) or BAD


def _ocr(value: object) -> object:
    return None if value is None else parse_ocr(value) or BAD


def _refused(value: object) -> object:
    if value is None:
        return None
    found = parse_refused(value)
    return BAD if found is None else found


@dataclass(frozen=True)
class Page:
    """A reduced page as the cache keeps it, and as a fetch_page result tells of it: its facts,
    declared once (``worker.state.result_records`` writes and reads a result's from these)."""

    url: str  # the canonical URL asked for (the cache key's URL)
    final_url: str
    status: int
    content_type: str
    title: str
    text: str  # the first piece; a result says the piece it was asked for
    truncated: bool
    redirects: int
    bytes_read: int
    fetched_at: str  # when the page was fetched from its server (UTC, to the second)
    extraction: str  # "main" or "full"
    links: tuple[str, ...]
    hidden_removed: int
    pages: int | None = field(default=None, metadata={WHEN_SET: True})  # PDFs only
    pages_read: int | None = field(default=None, metadata={WHEN_SET: True})  # PDFs only
    # Cross-site redirects followed, each checked by the menu rule of the report that reads the page.
    hops: tuple[Hop, ...] = field(default=(), metadata={CACHE_ONLY: True})
    # The kept document with the whole text (worker.state.pages.documents).
    document: str | None = field(default=None, metadata={CACHE_ONLY: True})
    # HTML and PDFs: what the page declares about itself.
    metadata: PageMetadata | None = field(default=None, metadata={WHEN_SET: True, READ: _metadata})
    # The evidence of the original fetch, which a cache hit (and a continuation of the kept
    # document) names as its own: the hex SHA-256 of the body read, and the archive's record id
    # of that fetch (None: it is not in the archive). See worker.archive.
    sha256: str = field(default="", metadata={READ: _sha256})
    archive_record: str | None = field(default=None, metadata={READ: _record_id})
    # A rendered page's screenshot (PNG) in the archive (jobs/render): set on rendered results only.
    screenshot_record: str | None = field(default=None, metadata={WHEN_SET: True, READ: _record_id})
    rendered: bool = False  # a browser rendered it (jobs/render); never kept in the shared cache
    script_shell: bool = False  # an app shell whose text its scripts build (jobs/reader/script_shell)
    # Scans and images: which pages OCR read (worker.document_notes); None when it read none.
    ocr: OcrNote | None = field(default=None, metadata={WHEN_SET: True, READ: _ocr})
    # Office documents: what was found and not followed (a macro, a link to an outside file).
    refused: tuple[str, ...] | None = field(default=None, metadata={WHEN_SET: True, READ: _refused})
    # Documents the page embeds as its content (a PDF in an iframe, embed or object, a PDF viewer's
    # file=): canonical https URLs, each put on the report's menu (jobs.reader.embedded).
    documents: tuple[str, ...] = ()


@dataclass(frozen=True)
class Failure:
    """A fetch that failed in a way every report would see the same: shared with the jobs waiting on
    it, and kept briefly when the page is gone (404, 410)."""

    kind: ErrorKind
    message: str  # the worker's own words and validated values, never server text
    status: int | None
    reason: str | None  # a guardian refusal's reason
    hops: tuple[Hop, ...]

    def error(self) -> ResearchError:
        return _REBUILD[self.kind](self)


@dataclass(frozen=True)
class Abandoned:
    """The fetcher gave up for a reason of its own: a waiter should fetch for itself."""


@dataclass(frozen=True)
class KeptPage:
    """A cached page whose record and whole text are its kept document's
    (``worker.state.pages.documents``): the entry names the document, and the cross-site hops the
    fetch followed (the document's record leaves those to the cache)."""

    url: str  # the canonical URL asked for, as a Page's
    document: str = field(
        metadata={READ: lambda v: v if isinstance(v, str) and _HEX_64.fullmatch(v) else BAD}
    )
    hops: tuple[Hop, ...] = ()


Outcome = Page | Failure | Abandoned
Entry = Outcome | KeptPage  # what an entry key may hold; a flight hands its waiters an Outcome

_REBUILD: dict[ErrorKind, Callable[[Failure], ResearchError]] = {
    ErrorKind.HTTP_STATUS: lambda f: HttpStatus(f.message, status=f.status or 0),
    ErrorKind.TOO_MANY_REDIRECTS: lambda f: TooManyRedirects(f.message),
    ErrorKind.UNSUPPORTED_CONTENT_TYPE: lambda f: UnsupportedContentType(f.message),
    ErrorKind.DNS_FAILURE: lambda f: DnsFailure(f.message),
    ErrorKind.CONNECTION_FAILED: lambda f: ConnectionFailed(f.message),
    ErrorKind.TIMEOUT: lambda f: Timeout(f.message),
    ErrorKind.RATE_LIMITED: lambda f: RateLimited(f.message),
    ErrorKind.DESTINATION_BLOCKED: lambda f: DestinationBlocked(f.message, reason=Reason(str(f.reason))),
    ErrorKind.SCHEME_NOT_ALLOWED: lambda f: SchemeNotAllowed(f.message, reason=Reason(str(f.reason))),
}
GUARDIAN_KINDS = frozenset({ErrorKind.DESTINATION_BLOCKED, ErrorKind.SCHEME_NOT_ALLOWED})
# What a waiter may take from another job's failed fetch: facts about the page, the same for every
# report. A refusal by the fetcher's own menu (url_not_in_menu) is not one of them.
SHARED_KINDS = frozenset(_REBUILD)
_REASONS = frozenset(reason.value for reason in Reason)


def failure_of(error: ResearchError, hops: tuple[Hop, ...]) -> Failure | None:
    """The shareable form of a fetch's error, or None when other reports must not take it."""
    if error.kind not in SHARED_KINDS:
        return None
    reason = error.reason.value if isinstance(error, GuardianRefusal) else None
    return Failure(error.kind, error.message, error.status, reason, hops)


def encode(outcome: Entry) -> bytes:
    if isinstance(outcome, Page):
        return orjson.dumps({"v": VERSION, "page": asdict(outcome)})
    if isinstance(outcome, Failure):
        return orjson.dumps({"v": VERSION, "failure": asdict(outcome)})
    if isinstance(outcome, KeptPage):
        return orjson.dumps({"v": VERSION, "kept": asdict(outcome)})
    return orjson.dumps({"v": VERSION, "abandoned": True})


def decode(raw: bytes) -> Entry | None:
    """What an entry (or a flight's outcome) holds, or None when it is not one this worker wrote."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(value, dict) or value.get("v") != VERSION:
        return None
    if isinstance(page := value.get("page"), dict):
        return read_page(page)
    if isinstance(failure := value.get("failure"), dict):
        return _failure(failure)
    if isinstance(kept := value.get("kept"), dict):
        return read_declared(KeptPage, kept, complete=True)
    if value.get("abandoned") is True:
        return Abandoned()
    return None


def read_page(d: Mapping[str, object], *, entry: bool = True) -> Page | None:
    """The page ``d`` holds, each field checked against its declaration; None when one is missing
    or of another shape. An entry holds every field; a result (``entry=False``) holds no field of
    the cache's own and leaves out those only set for some pages."""
    return read_declared(Page, d, complete=entry)


def read_declared(cls: type[T], d: Mapping[str, object], *, complete: bool) -> T | None:
    """A frozen record of ``cls`` from its JSON, each field read by its declared type (or its own
    ``READ``); None when a field is missing or of another shape. ``complete``: every field is
    there, the cache's own included; else those are left out, and a ``WHEN_SET`` one may be."""
    values: dict[str, object] = {}
    readers = _readers(cls)
    for declared in fields(cls):  # type: ignore[arg-type]  # cls is a dataclass
        if not complete and declared.metadata.get(CACHE_ONLY):
            continue
        if declared.name not in d:
            if complete or not declared.metadata.get(WHEN_SET):
                return None
            continue
        value = readers[declared.name](d[declared.name])
        if value is BAD:
            return None
        values[declared.name] = value
    return cls(**values)


def _readers(cls: type) -> dict[str, Callable[[object], object]]:
    if cls not in _READERS:
        hints = get_type_hints(cls)
        _READERS[cls] = {f.name: f.metadata.get(READ) or _reader(hints[f.name]) for f in fields(cls)}
    return _READERS[cls]


_READERS: dict[type, dict[str, Callable[[object], object]]] = {}


def _reader(hint: object) -> Callable[[object], object]:
    """A check for a JSON value of the declared type, giving the field's value or BAD."""
    origin, args = get_origin(hint), get_args(hint)
    if hint in (str, bool):
        return lambda v: v if isinstance(v, hint) else BAD
    if hint is int:
        return lambda v: v if _is_int(v) else BAD
    if origin is UnionType and len(args) == 2 and type(None) in args:
        inner = _reader(next(a for a in args if a is not type(None)))
        return lambda v: None if v is None else inner(v)
    if is_dataclass(hint) and isinstance(hint, type):
        return functools.partial(_read_record, hint)
    if origin is tuple and args[-1] is Ellipsis:
        return functools.partial(_read_items, _reader(args[0]))
    if origin is tuple:
        return functools.partial(_read_fixed, tuple(_reader(a) for a in args))
    raise TypeError(f"a page field of type {hint} needs a reader of its own")


def _read_record(cls: type, value: object) -> object:
    # A nested record may leave out its WHEN_SET fields (a match's page); every other is there.
    record = read_declared(cls, value, complete=False) if isinstance(value, dict) else None
    return BAD if record is None else record


def _read_items(read: Callable[[object], object], value: object) -> object:
    items = tuple(read(item) for item in value) if isinstance(value, list) else (BAD,)
    return BAD if any(item is BAD for item in items) else items


def _read_fixed(reads: tuple[Callable[[object], object], ...], value: object) -> object:
    if not isinstance(value, list) or len(value) != len(reads):
        return BAD
    items = tuple(read(item) for read, item in zip(reads, value, strict=True))
    return BAD if any(item is BAD for item in items) else items


def _failure(d: Mapping[str, Any]) -> Failure | None:
    try:
        kind = ErrorKind(str(d.get("kind")))
    except (ValueError, TypeError):
        return None
    message, status, reason = d.get("message"), d.get("status"), d.get("reason")
    hops = _hops(d.get("hops"))
    if (
        kind not in SHARED_KINDS
        or not isinstance(message, str)
        or not (status is None or _is_int(status))
        or not (isinstance(reason, str) and reason in _REASONS if kind in GUARDIAN_KINDS else reason is None)
        or hops is None
    ):
        return None
    return Failure(kind, message, status, reason, hops)


def _hops(value: object) -> tuple[Hop, ...] | None:
    if not isinstance(value, list):
        return None
    hops: list[Hop] = []
    for hop in value:
        if not (isinstance(hop, list) and len(hop) == 2 and all(isinstance(u, str) for u in hop)):
            return None
        hops.append((hop[0], hop[1]))
    return tuple(hops)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
