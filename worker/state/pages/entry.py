"""What the shared page cache holds and what a flight hands its waiters, as orjson.

An entry is a reduced page (everything a fetch_page result says about the page, plus the redirect
hops to other sites it went through, which each reader re-checks against its own menu), or a
failure: a brief 404 or 410, or the outcome of a fetch that waiters share. A flight abandoned by
its fetcher (a report-specific refusal, a crash) says only that, so a waiter fetches instead.

Entries are written by workers, but Redis is shared state, so reading one never trusts its shape:
anything unexpected is no entry at all (a miss), never an exception. The format carries a version;
a worker that finds another version treats it as a miss and overwrites it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import orjson

from worker.archive.ids import parse_record_id
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


@dataclass(frozen=True)
class Page:
    """A reduced page as the cache keeps it."""

    url: str  # the canonical URL asked for (the cache key's URL)
    final_url: str
    status: int
    content_type: str
    title: str
    text: str
    truncated: bool
    redirects: int
    bytes_read: int
    fetched_at: str  # when the page was fetched from its server (UTC, to the second)
    extraction: str
    links: tuple[str, ...]
    hidden_removed: int
    pages: int | None = None  # PDFs only
    pages_read: int | None = None  # PDFs only
    hops: tuple[Hop, ...] = ()  # cross-site redirects followed, each checked by the menu rule
    document: str | None = None  # the kept document with the whole text (worker.state.pages.documents)
    metadata: PageMetadata | None = None  # HTML and PDFs: what the page declares about itself
    # The evidence of the original fetch, which a cache hit (and a continuation of the kept
    # document) names as its own: the hex SHA-256 of the body read, and the archive's record id
    # of that fetch (None: it is not in the archive). See worker.archive.
    sha256: str = ""
    archive_record: str | None = None
    rendered: bool = False  # a browser rendered it (jobs/render); never kept in the shared cache
    script_shell: bool = False  # an app shell whose text its scripts build (jobs/reader/script_shell)


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


Outcome = Page | Failure | Abandoned

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


def encode(outcome: Outcome) -> bytes:
    if isinstance(outcome, Page):
        return orjson.dumps({"v": VERSION, "page": asdict(outcome)})
    if isinstance(outcome, Failure):
        return orjson.dumps({"v": VERSION, "failure": asdict(outcome)})
    return orjson.dumps({"v": VERSION, "abandoned": True})


def decode(raw: bytes) -> Outcome | None:
    """The outcome an entry holds, or None when it is not one this worker wrote."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(value, dict) or value.get("v") != VERSION:
        return None
    if isinstance(page := value.get("page"), dict):
        return _page(page)
    if isinstance(failure := value.get("failure"), dict):
        return _failure(failure)
    if value.get("abandoned") is True:
        return Abandoned()
    return None


def _page(d: Mapping[str, Any]) -> Page | None:
    texts = ("url", "final_url", "content_type", "title", "text", "fetched_at", "extraction")
    numbers = ("status", "redirects", "bytes_read", "hidden_removed")
    links = d.get("links")
    hops = _hops(d.get("hops"))
    # An entry written before pages carried metadata has no "metadata" key: a miss, so that a hit
    # on an HTML page or a PDF always returns it.
    metadata = parse_metadata(d.get("metadata")) if d.get("metadata") is not None else None
    if (
        "metadata" not in d
        or (d.get("metadata") is not None and metadata is None)
        or not all(isinstance(d.get(name), str) for name in texts)
        or not all(_is_int(d.get(name)) for name in numbers)
        or not isinstance(d.get("truncated"), bool)
        or not isinstance(links, list)
        or not all(isinstance(link, str) for link in links)
        or not all(d.get(name) is None or _is_int(d.get(name)) for name in ("pages", "pages_read"))
        or hops is None
        or not (d.get("document") is None or isinstance(d.get("document"), str))
        or not _is_sha256(d.get("sha256"))
        or not (d.get("archive_record") is None or parse_record_id(d.get("archive_record")) is not None)
        or not all(isinstance(d.get(name, False), bool) for name in ("rendered", "script_shell"))
    ):
        return None
    return Page(
        url=d["url"],
        final_url=d["final_url"],
        status=d["status"],
        content_type=d["content_type"],
        title=d["title"],
        text=d["text"],
        truncated=d["truncated"],
        redirects=d["redirects"],
        bytes_read=d["bytes_read"],
        fetched_at=d["fetched_at"],
        extraction=d["extraction"],
        links=tuple(links),
        hidden_removed=d["hidden_removed"],
        pages=d.get("pages"),
        pages_read=d.get("pages_read"),
        hops=hops,
        document=d.get("document"),
        metadata=metadata,
        sha256=d["sha256"],
        archive_record=d.get("archive_record"),
        rendered=d.get("rendered", False),
        script_shell=d.get("script_shell", False),
    )


def page_from_fields(d: Mapping[str, Any]) -> Page | None:
    """A page from a result's fields (a render worker's), checked like an entry; None when it is not one."""
    return _page({"metadata": None, **d, "hops": d.get("hops", [])})


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


def _is_sha256(value: object) -> bool:
    # An entry from a worker before the archive has none: a miss, fetched again with its hash.
    return isinstance(value, str) and (value == "" or (len(value) == 64 and all(c in _HEX for c in value)))


_HEX = frozenset("0123456789abcdef")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
