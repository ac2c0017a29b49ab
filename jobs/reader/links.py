"""The page's links as the URL menu stores them: absolute, https, canonical, distinct, in page order.

Links are resolved with yarl, the parser the guardian uses, never with a parser that disagrees
with it. A link the parser cannot read (``//[ccpa-preferences]/x``, an unbalanced bracket, a port
of a hundred digits, a host whose characters normalize to ``/`` or ``@``) is dropped and counted in
``unresolved``, and so is a ``<base href>`` that cannot be read (the page's own URL is the base
then): a page is never lost because of one of its links.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import yarl

from worker.guardian.urls import canonical_url

MAX_LINKS = 500

# The WHATWG URL parser trims C0 controls and spaces from both ends and drops tabs and newlines
# anywhere; an href split over lines is one URL to a browser, so it is one to us.
_TAB_OR_NEWLINE = re.compile(r"[\t\n\r]")
_C0_OR_SPACE = "".join(chr(c) for c in range(0x21))
_NOT_FETCHABLE = ("#", "javascript:", "mailto:", "tel:", "data:", "about:", "blob:", "sms:", "ftp:")
# Absolute https URLs written out in a text body (JSON, a feed, a plain list of sources).
_URL_IN_TEXT = re.compile(r"https://[^\s\"'<>`{}|\\^\[\]]+", re.IGNORECASE)
_TRAILING_PUNCTUATION = ".,;:!?)'\""
# Each candidate costs a canonical parse; a body of 100,000 distinct junk URLs must not.
_MAX_CANDIDATES = 5000


def _clean(href: str) -> str:
    return _TAB_OR_NEWLINE.sub("", href.strip(_C0_OR_SPACE))


def resolve(base: yarl.URL, href: str) -> yarl.URL | None:
    """``href`` resolved against ``base``, or None when the URL parser cannot read the result."""
    try:
        joined = base.join(yarl.URL(href, encoded=True))
        # yarl checks some parts (the port, IPv6 brackets) only when the URL is turned into text.
        str(joined)
    except (ValueError, TypeError, IndexError, UnicodeError, OverflowError):
        return None
    return joined


class LinkResolver:
    """Resolves hrefs a batch at a time (so the caller can yield between batches) until full."""

    def __init__(self, base_href: str | None, page_url: str) -> None:
        self._base = yarl.URL(page_url, encoded=True)
        self.unresolved = 0  # hrefs, and a <base href>, that the URL parser could not read
        if base_href is not None:
            cleaned = _clean(base_href)
            base = resolve(self._base, cleaned) if cleaned else self._base
            if base is None:
                self.unresolved += 1
            else:
                self._base = base
        self.links: list[str] = []
        self.canonical: dict[str, str] = {}  # each href that became (or repeats) a link: its link
        self._seen: set[str] = set()

    @property
    def full(self) -> bool:
        return len(self.links) >= MAX_LINKS

    def add(self, hrefs: Iterable[str]) -> bool:
        """Resolve ``hrefs`` in order; True once MAX_LINKS links are found."""
        for href in hrefs:
            if self.full:
                break
            cleaned = _clean(href)
            if not cleaned or cleaned[:11].lower().startswith(_NOT_FETCHABLE):
                continue
            joined = resolve(self._base, cleaned)
            if joined is None:
                self.unresolved += 1
                continue
            canonical = canonical_url(str(joined))
            if canonical is None:
                continue
            if canonical in self._seen:
                self.canonical[href] = canonical
                continue
            self._seen.add(canonical)
            self.links.append(canonical)
            self.canonical[href] = canonical
        return self.full


def urls_in_text(text: str) -> list[str]:
    """Distinct https URLs spelled out in a non-HTML body (a feed, an API answer, a list of
    sources), trailing punctuation dropped, at most _MAX_CANDIDATES of them."""
    found: list[str] = []
    seen: set[str] = set()
    for match in _URL_IN_TEXT.finditer(text):
        raw = match.group(0).rstrip(_TRAILING_PUNCTUATION)
        if raw in seen:
            continue
        seen.add(raw)
        found.append(raw)
        if len(found) == _MAX_CANDIDATES:
            break
    return found
