"""The contract's result objects: one frozen record per kind, one way to the wire, one way back.

A result is a head (``tool``, ``report_id``, ``job_id``; ``ok`` says which kind follows) and either
a tool's fields (fetch_page's, web_search's, or the JSON of a tool outside the contract) or an
error. ``as_json`` is the one serializer (``encode`` its orjson bytes); ``parse`` is the one reader
back, and since Redis is shared state it trusts no shape: anything unexpected is None, never an
exception. A fetch result holds its ``Page`` (``worker.state.pages.entry``), whose declaration says
which of its fields are the page cache's own and never reach a result.

Every string a result puts on the wire is valid UTF-8 by construction: Python strings can hold lone
surrogates (a server's undecodable byte kept by ``surrogateescape``, a ``\\udc80`` escape) that no
UTF-8 can carry, orjson refuses them, and a result that cannot be serialized is a lost result.
They become U+FFFD here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields, replace
from typing import Final, NotRequired, TypedDict, cast

from worker.errors import ErrorKind, ResearchError
from worker.limits import FETCH_PAGE, WEB_SEARCH
from worker.serialization import JsonObject, JsonValue, dumps, loads_object
from worker.state.pages.entry import CACHE_ONLY, WHEN_SET, Page, read_declared, read_page

OK = "ok"
# The render worker's job (jobs/render): its result is a page's, read back by the fetch that asked.
RENDER_PAGE = "render_page"
PAGE_TOOLS = frozenset({FETCH_PAGE, RENDER_PAGE})
# An error message is a sentence or two for the model; a longer one is a bug, not information.
MAX_MESSAGE_CHARS = 1000
SURROGATES = re.compile("[\ud800-\udfff]")
HEAD = ("ok", "tool", "report_id", "job_id")
# What a result says beside its records' own fields, worked out as it is written: whether the page
# (or the search's answer) is in the evidence archive.
ARCHIVED = "archived"
PAGE_DERIVED: Final = {ARCHIVED: bool}
SEARCH_DERIVED: Final = {ARCHIVED: bool}


class Citation(TypedDict):
    title: str
    url: str
    snippet: str


class CitedPart(TypedDict):
    offset: int
    length: int


class CitationCheck(TypedDict):
    """A quote checked against what a report fetched: a ``cite`` result's fields, and each of a
    ``verify``'s citations (docs/citations.md). The fields after ``status`` when it was found."""

    url: str
    quote: str
    status: str  # "verified", "approximate", "not_found" or "not_fetched"
    offset: NotRequired[int]
    length: NotRequired[int]
    page: NotRequired[int]
    matched_text: NotRequired[str]
    context: NotRequired[str]
    sha256: NotRequired[str | None]
    archive_record: NotRequired[str | None]
    fetched_at: NotRequired[str | None]
    format: NotRequired[str]
    extract: NotRequired[str]
    source: NotRequired[str]  # "kept" or "archive"
    parts: NotRequired[list[CitedPart]]  # an elided quote's parts
    note: NotRequired[str]  # a not_found whose text is gone from the kept documents and the archive


class About(TypedDict, total=False):
    """What a job was about, carried by its result even when it failed."""

    url: str
    query: str


@dataclass(frozen=True)
class Head:
    tool: str
    report_id: str | None  # None only in an error result: a job refused for its report id
    job_id: str


@dataclass(frozen=True)
class FoundMatch:
    offset: int  # where the match starts in the whole text
    snippet: str
    page: int | None = field(default=None, metadata={WHEN_SET: True})  # PDFs: the page it starts on


@dataclass(frozen=True)
class TextPiece:
    """The text a fetch result carries: one piece of the whole document, or a find's matches."""

    format: str  # "markdown" or "text"
    text: str
    offset: int  # where ``text`` starts in the whole document's text
    total_chars: int  # the whole document's text, in this format
    next_offset: int | None  # where the next piece starts; None at the end
    # PDFs only: where each page starts in the whole text.
    page_offsets: tuple[int, ...] | None = field(default=None, metadata={WHEN_SET: True})
    # With ``find`` only; ``text`` is then "".
    matches: tuple[FoundMatch, ...] | None = field(default=None, metadata={WHEN_SET: True})
    # True when the report's read budget stopped a continuation short of what it would return.
    read_budget_cut: bool | None = field(default=None, metadata={WHEN_SET: True})


@dataclass(frozen=True)
class FetchFields:
    """What fetch_page (and the render worker's render_page) adds to the head."""

    page: Page
    cached: bool  # served from the shared page cache
    piece: TextPiece | None = None  # None: a render worker's page, whose text is its first piece
    refetched: bool = False  # a continuation whose kept document was gone, fetched again


@dataclass(frozen=True)
class SearchFields:
    """What web_search adds to the head."""

    query: str
    results: tuple[Citation, ...]
    provider: str
    archive_record: str | None = None  # the provider's answer in the evidence archive
    asked: bool = True  # False: max_results 0 asked no provider, and says nothing of the archive


@dataclass(frozen=True)
class OtherFields:
    """The fields of a tool outside the contract (the tests', the benchmarks'): its own JSON."""

    values: JsonObject


Fields = FetchFields | SearchFields | OtherFields


@dataclass(frozen=True)
class OkResult:
    head: Head
    fields: Fields


@dataclass(frozen=True)
class ErrorResult:
    head: Head
    kind: ErrorKind
    message: str  # the worker's own words, at most MAX_MESSAGE_CHARS
    url: str | None = None  # what the job was about (``About``)
    query: str | None = None
    status: int | None = None  # said whenever it is known, and always for http_status

    @classmethod
    def of(cls, head: Head, error: ResearchError, about: About | None = None) -> ErrorResult:
        about = about or {}
        message = error.message[:MAX_MESSAGE_CHARS]
        return cls(head, error.kind, message, about.get("url"), about.get("query"), error.status)


Result = OkResult | ErrorResult


def unstored(head: Head) -> ErrorResult:
    """What stands in for a result that could not be written: the job's identity and a kind."""
    message = "the worker finished this job but could not store its result"
    return ErrorResult(head, ErrorKind.INTERNAL_ERROR, message)


def outcome(result: Result) -> str:
    """'ok' or the error kind: the label logs, metrics and the dashboard use."""
    return OK if isinstance(result, OkResult) else result.kind.value


def encode(result: Result) -> bytes:
    """The result on the wire. Raises TypeError for a value JSON cannot hold (only a tool outside the
    contract can hand one back)."""
    return dumps(as_json(result))


def as_json(result: Result) -> JsonObject:
    """The result's JSON object, exactly as the contract writes it, every string valid UTF-8."""
    head = result.head
    shown: JsonObject = {
        "ok": isinstance(result, OkResult),
        "tool": head.tool,
        "report_id": head.report_id,
        "job_id": head.job_id,
    }
    body = _error_json(result) if isinstance(result, ErrorResult) else _fields_json(result.fields)
    return cast(JsonObject, clean({**shown, **body}))


def _error_json(result: ErrorResult) -> JsonObject:
    shown: JsonObject = {"error": {"kind": result.kind.value, "message": result.message}}
    if result.url is not None:
        shown["url"] = result.url
    if result.query is not None:
        shown["query"] = result.query
    if result.status is not None or result.kind is ErrorKind.HTTP_STATUS:
        shown["status"] = result.status
    return shown


def _fields_json(given: Fields) -> JsonObject:
    if isinstance(given, OtherFields):
        return given.values
    if isinstance(given, SearchFields):
        shown: JsonObject = {
            "query": given.query,
            "results": [
                {"title": c["title"], "url": c["url"], "snippet": c["snippet"]} for c in given.results
            ],
            "provider": given.provider,
        }
        if given.asked:
            shown.update({ARCHIVED: given.archive_record is not None, "archive_record": given.archive_record})
        return shown
    shown = {**_page_json(given.page), "cached": given.cached}
    if given.piece is not None:
        shown.update(_declared_json(given.piece), refetched=given.refetched)
    return shown


def _page_json(page: Page) -> JsonObject:
    # A PDF read all its pages unless it says otherwise; a page that is no PDF counts none.
    pages_read = (
        (page.pages_read if page.pages_read is not None else page.pages) if page.pages is not None else None
    )
    shown = _declared_json(replace(page, pages_read=pages_read))
    shown[ARCHIVED] = page.archive_record is not None
    shown["script_shell"] = page.script_shell and not page.rendered
    return shown


def _declared_json(record: Page | TextPiece | FoundMatch) -> JsonObject:
    """A record's fields by its declaration: not the cache's own, not one unset that says so."""
    shown: JsonObject = {}
    for declared in fields(record):
        value = getattr(record, declared.name)
        if declared.metadata.get(CACHE_ONLY) or (value is None and declared.metadata.get(WHEN_SET)):
            continue
        shown[declared.name] = _plain(value)
    return shown


def _plain(value: object) -> JsonValue:
    if isinstance(value, FoundMatch):
        return _declared_json(value)
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    return cast(JsonValue, value)  # a str, number, bool, None, or the page's metadata object


def clean_text(value: str) -> str:
    """The string with every surrogate code point replaced by U+FFFD: encodable as UTF-8."""
    return SURROGATES.sub("\ufffd", value) if SURROGATES.search(value) else value


def clean(value: object) -> JsonValue:
    """Strings anywhere in a result (dict keys, lists, nested objects) made valid UTF-8. A value
    JSON cannot hold is passed on for orjson to refuse."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(k) if isinstance(k, str) else k: clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean(item) for item in value]
    return cast(JsonValue, value)


def parse(raw: bytes | None) -> Result | None:
    """The result a stored JSON object is, or None when it is not one this worker writes."""
    return parse_object(loads_object(raw))


def parse_object(value: JsonObject | None) -> Result | None:
    if value is None:
        return None
    tool, report_id, job_id = value.get("tool"), value.get("report_id"), value.get("job_id")
    if not (isinstance(tool, str) and isinstance(job_id, str)):
        return None
    if not (report_id is None or isinstance(report_id, str)):
        return None
    head = Head(tool, report_id, job_id)
    ok = value.get("ok")
    if ok is False:
        return _error(head, value)
    if ok is not True:
        return None
    read: Fields | None
    if tool in PAGE_TOOLS:
        read = _fetch_fields(value)
    elif tool == WEB_SEARCH:
        read = _search_fields(value)
    else:
        read = OtherFields({name: v for name, v in value.items() if name not in HEAD})
    return None if read is None else OkResult(head, read)


def _error(head: Head, value: JsonObject) -> ErrorResult | None:
    error, url, query, status = value.get("error"), value.get("url"), value.get("query"), value.get("status")
    if not isinstance(error, dict) or not isinstance(message := error.get("message"), str):
        return None
    try:
        kind = ErrorKind(str(error.get("kind")))
    except ValueError:
        return None
    if not all(v is None or isinstance(v, str) for v in (url, query)):
        return None
    if not (status is None or (isinstance(status, int) and not isinstance(status, bool))):
        return None
    return ErrorResult(head, kind, message, cast(str | None, url), cast(str | None, query), status)


def _fetch_fields(value: JsonObject) -> FetchFields | None:
    page, cached = read_page(value, entry=False), value.get("cached")
    if page is None or not isinstance(cached, bool):
        return None
    if "format" not in value:
        return FetchFields(page, cached)
    piece, refetched = read_declared(TextPiece, value, complete=False), value.get("refetched")
    if piece is None or not isinstance(refetched, bool):
        return None
    return FetchFields(page, cached, piece, refetched)


def _search_fields(value: JsonObject) -> SearchFields | None:
    query, results, provider = value.get("query"), value.get("results"), value.get("provider")
    if not (isinstance(query, str) and isinstance(provider, str) and isinstance(results, list)):
        return None
    citations: list[Citation] = []
    for item in results:
        if not isinstance(item, dict) or set(item) != set(Citation.__annotations__):
            return None
        title, url, snippet = item["title"], item["url"], item["snippet"]
        if not (isinstance(title, str) and isinstance(url, str) and isinstance(snippet, str)):
            return None
        citations.append({"title": title, "url": url, "snippet": snippet})
    if "archived" not in value:
        return SearchFields(query, tuple(citations), provider, asked=False)
    record = value.get("archive_record")
    if not (record is None or isinstance(record, str)):
        return None
    return SearchFields(query, tuple(citations), provider, record)
