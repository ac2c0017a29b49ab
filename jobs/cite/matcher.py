"""The citation matcher: is a quote on a page, where, and how exactly (docs/citations.md).

A quote is split at its ellipses (``...``, ``…``, bracketed or not) into parts that must be found
in order, each within ``MAX_GAP`` characters of the one before. Each part is folded (``fold``)
the way the document was, and found with ``str.find`` in the folded document, with a separator
required on each side where the part begins or ends with a word: a quote never starts or ends
inside a word, so "10 percent" is not found in "110 percent", nor "is true" in "is not true".

``verified``: every part found in the STRICT fold (the page's own characters, whitespace and
invisible characters aside). ``approximate``: found only in the LOOSE fold. Else ``not_found``.

Time: the document is folded once per fold (linear); each part costs a few ``str.find`` calls,
each linear in the document; an elided quote whose first part recurs tries each occurrence in
turn, and every later part's search only moves forward (its last answer is reused while still
ahead), so the work is linear in the document for each part and each occurrence of the first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from jobs.cite.fold import BOUND, QUOTES, Fold, Folded, fold

MAX_GAP = 2000
# An ellipsis in a quote: three or more dots (spaced or not) or the character, in brackets or not.
_ELLIPSIS = re.compile(r"\s*[\[(]?\s*(?:\.\s?\.\s?\.(?:\s?\.)*|\u2026)\s*[\])]?\s*")


class Status(StrEnum):
    VERIFIED = "verified"
    APPROXIMATE = "approximate"
    NOT_FOUND = "not_found"
    NOT_FETCHED = "not_fetched"


@dataclass(frozen=True)
class Found:
    status: Status
    start: int  # in the original document
    end: int
    parts: tuple[tuple[int, int], ...]  # each part's [start, end) in the original document


def parts_of(quote: str) -> list[str]:
    """The quote's parts between ellipses, empty ones left out."""
    return [part for part in _ELLIPSIS.split(quote) if part.strip()]


def unwrapped(quote: str) -> str | None:
    """The quote without the quotation marks wrapping it whole, when it has them."""
    text = quote.strip()
    if len(text) >= 2 and text[0] in QUOTES and text[-1] in QUOTES:
        return text[1:-1]
    return None


@dataclass(frozen=True)
class _Part:
    key: str
    word_start: bool
    word_end: bool


def _part(text: str, how: Fold) -> _Part | None:
    key = fold(text, how).text
    if not key:
        return None
    return _Part(key, _wordy(key[0]), _wordy(key[-1]))


def _wordy(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


class Document:
    """A document folded once for each tier, ready for any number of quotes."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._folds: dict[Fold, Folded] = {}

    def folded(self, how: Fold) -> Folded:
        if how not in self._folds:
            self._folds[how] = fold(self.text, how)
        return self._folds[how]

    def match(self, quote: str) -> Found:
        """Where ``quote`` is in the document, and at which tier."""
        candidates = [quote]
        if (inner := unwrapped(quote)) is not None:
            candidates.append(inner)
        for how, status in ((Fold.STRICT, Status.VERIFIED), (Fold.LOOSE, Status.APPROXIMATE)):
            for candidate in candidates:
                spans = self._chain(candidate, how)
                if spans:
                    return Found(status, spans[0][0], spans[-1][1], tuple(spans))
        return Found(Status.NOT_FOUND, 0, 0, ())

    def _chain(self, quote: str, how: Fold) -> list[tuple[int, int]] | None:
        parts = [p for p in (_part(text, how) for text in parts_of(quote)) if p is not None]
        if not parts:
            return None
        doc = self.folded(how)
        # Padded so a part may begin at the document's start and end at its end.
        haystack = " " + doc.text + " "
        search = _Search(haystack, how)
        lower = 0
        while True:
            first = search.find(0, parts[0], lower)
            if first is None:
                return None
            spans = [first]
            for index, part in enumerate(parts[1:], start=1):
                following = search.find(index, part, spans[-1][1])
                if following is None:
                    return None  # not after this one, so not after any later one either
                if _original(doc, following)[0] - _original(doc, spans[-1])[1] > MAX_GAP:
                    break
                spans.append(following)
            else:
                return [_original(doc, span) for span in spans]
            lower = first[0] + 1


def _original(doc: Folded, span: tuple[int, int]) -> tuple[int, int]:
    """A span of the padded folded text as original offsets."""
    return doc.original_start(span[0] - 1), doc.original_end(span[1] - 1)


class _Search:
    """Finds a part at a word's edges, moving forward only: a part's last answer is reused while
    the next search starts at or before it (and after the search that found it)."""

    def __init__(self, haystack: str, how: Fold) -> None:
        self.haystack = haystack
        self.seps = (" ", BOUND) if how is Fold.STRICT else (" ",)
        self.memo: dict[int, tuple[int, tuple[int, int] | None]] = {}

    def find(self, index: int, part: _Part, lower: int) -> tuple[int, int] | None:
        memo = self.memo.get(index)
        if memo is not None and memo[0] <= lower and (memo[1] is None or memo[1][0] >= lower):
            return memo[1]
        found = self._find(part, lower)
        self.memo[index] = (lower, found)
        return found

    def _find(self, part: _Part, lower: int) -> tuple[int, int] | None:
        """The first [start, end) at or after ``lower`` in the padded text."""
        lefts = self.seps if part.word_start else ("",)
        rights = self.seps if part.word_end else ("",)
        best: int | None = None
        for left in lefts:
            for right in rights:
                at = self.haystack.find(left + part.key + right, max(0, lower - len(left)))
                if at >= 0 and (best is None or at + len(left) < best):
                    best = at + len(left)
        return None if best is None else (best, best + len(part.key))
