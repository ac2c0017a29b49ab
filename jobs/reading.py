"""A document's text as fetch_page returns it: one piece, or the matches of a find.

The text comes from the reduction in hand (a first fetch) or from the document kept at the first
fetch (a continuation, ``worker.state.pages.documents``). Either way the answer is cut the same way
(``jobs.reader.pieces``), so a piece read now and one read later join into the whole. A
continuation's characters are charged to the report's read budget before they are read.
"""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from jobs.reader.pieces import Match, find, piece
from worker.errors import BudgetExhausted, InvalidRequest
from worker.limits import MAX_PAGE_OFFSETS
from worker.state.pages.documents import Kept, KeptDocuments
from worker.state.result_records import FoundMatch, TextPiece

# Grants up to the characters asked for from the read budget; None for a first fetch, which the
# fetch budget pays for.
Grant = Callable[[int], Awaitable[int]]
# Lowers a continuation's grant to the characters it returned.
Settle = Callable[[int], Awaitable[None]]
MARKDOWN = "markdown"


class KeptGone(Exception):
    """The kept document's text went away between its lookup and its read."""


class Source(Protocol):
    def total(self, name: str) -> int: ...
    def page_offsets(self, name: str) -> tuple[int, ...] | None: ...
    async def text(self, name: str, start: int, end: int) -> str: ...


@dataclass(frozen=True)
class InHand:
    """The whole text of each format, just reduced."""

    texts: Mapping[str, str]
    offsets: Mapping[str, tuple[int, ...] | None]

    def total(self, name: str) -> int:
        return len(self.texts[name])

    def page_offsets(self, name: str) -> tuple[int, ...] | None:
        return self.offsets.get(name)

    async def text(self, name: str, start: int, end: int) -> str:
        return self.texts[name][start:end]


@dataclass(frozen=True)
class FromKept:
    """The whole text of each format, as kept at the first fetch."""

    documents: KeptDocuments
    kept: Kept

    def total(self, name: str) -> int:
        return self.kept.layouts[name].total_chars

    def page_offsets(self, name: str) -> tuple[int, ...] | None:
        return self.kept.layouts[name].page_offsets

    async def text(self, name: str, start: int, end: int) -> str:
        text = await self.documents.text(self.kept, name, start, end)
        if text is None:
            raise KeptGone
        return text


async def answer(
    source: Source,
    name: str,
    *,
    offset: int,
    max_chars: int,
    needle: str | None,
    grant: Grant | None,
    settle: Settle | None = None,
) -> TextPiece:
    """The text of a fetch result: one piece from ``offset``, or the matches of a find (``text`` is
    then ""), with the whole text's length and a PDF's page offsets.

    A continuation is granted characters before it reads, and ``settle`` then gives back what it
    was granted but did not return (a piece that ends at a boundary, the matches that did not
    fit), so it is charged exactly what it returned; ``read_budget_cut`` says the budget stopped
    it short of what it would have returned."""
    total = source.total(name)
    page_offsets = source.page_offsets(name)
    if needle is not None:
        whole = await source.text(name, 0, total)
        # Folding a few MB takes tens of ms: off the event loop (str.split releases it often enough).
        found = await asyncio.to_thread(find, whole, needle, markdown=name == MARKDOWN)
        matches, short = await _granted_matches(found, grant, settle)
        return TextPiece(
            name,
            "",
            0,
            total,
            None,
            page_offsets,
            tuple(FoundMatch(m.offset, m.snippet, _page_of(m.offset, page_offsets, total)) for m in matches),
            True if short else None,
        )
    if offset > total:
        raise InvalidRequest(f"offset {offset:,} is past the end of the document ({total:,} characters)")
    wanted = min(max_chars, total - offset)
    granted = await _granted(wanted, grant) if wanted else 0
    # Read the piece with a little room past its end, so its seam can be chosen where it is safe.
    text = await source.text(name, offset, min(total, offset + granted + 1))
    window = piece(text, 0, granted, markdown=name == MARKDOWN) if granted else None
    length = len(window.text) if window is not None else 0
    if settle is not None and length < granted:
        await settle(length)
    next_offset = offset + length if offset + length < total else None
    budget_cut = True if granted < wanted else None
    return TextPiece(name, text[:length], offset, total, next_offset, page_offsets, None, budget_cut)


def _page_of(offset: int, page_offsets: tuple[int, ...] | None, total: int) -> int | None:
    """The PDF page (from 1) a match starts on; None for a page past the offsets kept (a PDF of
    more pages than ``MAX_PAGE_OFFSETS``) or a document that is no PDF."""
    if not page_offsets:
        return None
    page = bisect.bisect_right(page_offsets, offset)
    if page == 0 or (page == len(page_offsets) and page == MAX_PAGE_OFFSETS):
        return None
    return page


async def _granted(wanted: int, grant: Grant | None) -> int:
    if grant is None:
        return wanted
    granted = await grant(wanted)
    if granted <= 0:
        raise BudgetExhausted(_spent())
    return granted


async def _granted_matches(
    matches: list[Match], grant: Grant | None, settle: Settle | None
) -> tuple[list[Match], bool]:
    """The matches the read budget pays for, in order, and whether it stopped short of them all."""
    wanted = sum(len(m.snippet) for m in matches)
    if grant is None or not wanted:
        return matches, False
    granted = await _granted(wanted, grant)
    kept: list[Match] = []
    left = granted
    for match in matches:
        if left < len(match.snippet):
            break
        left -= len(match.snippet)
        kept.append(match)
    if settle is not None and left:
        await settle(granted - left)
    return kept, len(kept) < len(matches)


def _spent() -> str:
    return (
        "this report has used its read budget: the characters its continuations (an offset past "
        "the start, or a find) may return"
    )
