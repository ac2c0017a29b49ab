"""One citation checked: the quote matched against each text the report read for its URL, and the
best match written as the contract's citation object (docs/citations.md)."""

from __future__ import annotations

import asyncio
from bisect import bisect_right
from collections.abc import Awaitable, Callable
from typing import cast

from jobs.cite.matcher import Document, Found, Status, parts_of
from jobs.cite.sources import ReportTexts, Source, Unavailable
from worker.errors import InvalidRequest
from worker.guardian.urls import canonical_url
from worker.limits import MAX_URL_LENGTH
from worker.serialization import JsonObject
from worker.state.result_records import CitationCheck

CONTEXT_CHARS = 200
MAX_QUOTE_CHARS = 10_000
MAX_CITATIONS = 1_000
# Parts of an elided quote: bounds what one citation's matched_text may span (each gap 2,000).
MAX_PARTS = 20
# A verify job's quotes together: far above any dossier, far below what would stall a worker.
MAX_TOTAL_QUOTE_CHARS = 1_000_000
GONE_NOTE = "the report read this URL, but its text is no longer kept and no archived record holds it"

# Runs CPU work (folding a long document) off the event loop, under the worker's CPU slots.
Offload = Callable[[int, Callable[[], Found]], Awaitable[Found]]


async def inline(size: int, work: Callable[[], Found]) -> Found:
    return await asyncio.to_thread(work)


def parse_citation(value: object, where: str = "") -> tuple[str, str]:
    """(url, quote) from a citation object; InvalidRequest saying what is wrong and where."""
    if not isinstance(value, dict):
        raise InvalidRequest(f"{where}a citation must be an object with url and quote")
    url, quote = value.get("url"), value.get("quote")
    unknown = sorted(set(value) - {"url", "quote"})
    if unknown:
        raise InvalidRequest(f"{where}a citation takes only url and quote, not {', '.join(unknown[:3])}")
    return check_url_text(url, where), check_quote(quote, where)


def check_url_text(url: object, where: str = "") -> str:
    if not isinstance(url, str) or not url.strip():
        raise InvalidRequest(f"{where}url must be a non-empty string")
    if len(url) > MAX_URL_LENGTH:
        raise InvalidRequest(f"{where}url is longer than {MAX_URL_LENGTH:,} characters")
    return url.strip()


def check_quote(quote: object, where: str = "") -> str:
    if not isinstance(quote, str) or not quote.strip():
        raise InvalidRequest(f"{where}quote must be a non-empty string")
    if len(quote) > MAX_QUOTE_CHARS:
        raise InvalidRequest(f"{where}quote is longer than {MAX_QUOTE_CHARS:,} characters")
    if "\0" in quote:
        raise InvalidRequest(f"{where}quote must not contain a NUL character")
    if len(parts_of(quote)) > MAX_PARTS:
        raise InvalidRequest(f"{where}quote has more than {MAX_PARTS} parts between ellipses")
    return quote


def parse_citations(value: object) -> list[tuple[str, str]]:
    if not isinstance(value, list):
        raise InvalidRequest("citations must be a list of {url, quote} objects")
    if len(value) > MAX_CITATIONS:
        raise InvalidRequest(f"at most {MAX_CITATIONS:,} citations are checked at once")
    parsed = [parse_citation(item, f"citation {n}: ") for n, item in enumerate(value)]
    if sum(len(quote) for _, quote in parsed) > MAX_TOTAL_QUOTE_CHARS:
        raise InvalidRequest(f"the quotes together are longer than {MAX_TOTAL_QUOTE_CHARS:,} characters")
    return parsed


class Checker:
    """A job's citations against one report's texts, each text folded once however many quotes."""

    def __init__(self, texts: ReportTexts, offload: Offload = inline) -> None:
        self._texts = texts
        self._offload = offload
        self._documents: dict[int, Document] = {}

    async def check(self, url: str, quote: str) -> CitationCheck:
        canonical = canonical_url(url)
        texts = await self._texts.texts(canonical) if canonical is not None else None
        if texts is None:
            return {"url": url, "quote": quote, "status": Status.NOT_FETCHED.value}
        if isinstance(texts, Unavailable):
            return {"url": url, "quote": quote, "status": Status.NOT_FOUND.value, "note": GONE_NOTE}
        best: tuple[Found, Source] | None = None
        read = 0
        while read < len(texts.made) or await texts.more():
            if read == len(texts.made):
                continue  # a reduction that gave nothing: on to the next
            source = texts.made[read]
            read += 1
            found = await self._offload(len(source.text), self._matcher(source, quote))
            if found.status is Status.VERIFIED:
                best = (found, source)
                break
            if found.status is Status.APPROXIMATE and best is None:
                best = (found, source)
        if best is None and not texts.made:
            return {"url": url, "quote": quote, "status": Status.NOT_FOUND.value, "note": GONE_NOTE}
        if best is None:
            return {"url": url, "quote": quote, "status": Status.NOT_FOUND.value}
        return described(url, quote, *best)

    def _matcher(self, source: Source, quote: str) -> Callable[[], Found]:
        document = self._documents.setdefault(id(source), Document(source.text))
        return lambda: document.match(quote)


def described(url: str, quote: str, found: Found, source: Source) -> CitationCheck:
    """A match as the citation shows it: where, on which page, what it matched, and the evidence."""
    text = source.text
    shown: CitationCheck = {
        "url": url,
        "quote": quote,
        "status": found.status.value,
        "offset": found.start,
        "length": found.end - found.start,
    }
    if source.page_offsets:
        shown["page"] = max(1, bisect_right(source.page_offsets, found.start))
    shown["matched_text"] = text[found.start : found.end]
    shown["context"] = text[max(0, found.start - CONTEXT_CHARS) : found.end + CONTEXT_CHARS]
    shown["sha256"] = source.sha256
    shown["archive_record"] = source.archive_record
    shown["fetched_at"] = source.fetched_at
    shown["format"] = source.format
    shown["extract"] = source.extract
    shown["source"] = source.origin
    if len(found.parts) > 1:
        shown["parts"] = [{"offset": start, "length": end - start} for start, end in found.parts]
    return shown


def as_json(citation: CitationCheck) -> JsonObject:
    return cast(JsonObject, citation)


def summary(citations: list[CitationCheck]) -> JsonObject:
    """The verify object's counts, beside its citations."""
    counts = {status.value: 0 for status in Status}
    for citation in citations:
        counts[str(citation["status"])] += 1
    return {"checked": len(citations), **counts, "citations": [as_json(c) for c in citations]}
