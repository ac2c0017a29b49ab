"""What a page declares about itself, collected while the reducer streams its tokens.

The reducer calls ``start`` for the start tags named in WATCHED; everything kept is bounded, so a
page of a million meta tags costs a set lookup per tag past the caps and no memory:

- ``<meta name|property|itemprop|http-equiv=... content=...>``: the key lowercased, the first
  values of each key in page order;
- ``<link rel=canonical href>`` (the first), ``<html lang>``;
- the text of ``<script type="application/ld+json">``, read straight from the page up to its end
  tag (the reducer skips every script unread), at most MAX_JSONLD_SCRIPT each and MAX_JSONLD_CHARS in all;
- ``<time datetime>`` with the context it sat in (article, main, or page furniture);
- microdata's ``itemprop="datePublished"`` (or ``dateCreated``) on any other element: its
  ``content`` or ``datetime`` when it has one, else where its text is (the index of the block it
  opens or joins), for the page's metadata to read the date the element shows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from jobs.reader.html.vocabulary import ARTICLE, ASIDE, COMMENTS, DROP, FOOTER, HIDDEN, MAIN, NAV

WATCHED = frozenset({"meta", "link", "html", "script", "time"})
MAX_KEYS = 200
MAX_VALUES_PER_KEY = 20
MAX_VALUE_CHARS = 4000
MAX_JSONLD_SCRIPTS = 32
# One orjson call cannot be paused: a script is read only when it parses in about a millisecond
# (128 KiB of dense JSON-LD), and all of them together are bounded too.
MAX_JSONLD_SCRIPT = 128 * 1024
MAX_JSONLD_CHARS = 512 * 1024
MAX_TIMES = 50
MAX_ITEM_DATES = 20
ITEM_DATES = frozenset({"datepublished", "datecreated"})
FURNITURE = NAV | ASIDE | FOOTER | COMMENTS | HIDDEN | DROP
JSONLD_TYPES = frozenset({"application/ld+json", "application/json+ld"})


class RawText(Protocol):
    def raw_text_ahead(self, name: str, limit: int) -> str | None: ...


@dataclass(frozen=True, slots=True)
class TimeTag:
    datetime: str
    role: str  # "published" (pubdate, itemprop=datePublished), "modified", or ""
    in_content: bool  # inside an article or main element
    furniture: bool  # inside nav, aside, footer, comments, or hidden


@dataclass(frozen=True, slots=True)
class ItemDate:
    value: str | None  # the element's content or datetime attribute
    block: int  # the index its text's block has (or the one before it), when value is None
    furniture: bool


@dataclass
class Declarations:
    metas: dict[str, list[str]] = field(default_factory=dict)
    canonical: str | None = None
    lang: str | None = None
    jsonld: list[str] = field(default_factory=list)
    times: list[TimeTag] = field(default_factory=list)
    item_dates: list[ItemDate] = field(default_factory=list)
    jsonld_chars: int = 0

    def itemprop(self, attrs: dict[str, str], bits: int, block: int) -> None:
        """An element other than meta and time that carries an ``itemprop``."""
        if attrs["itemprop"].strip().lower() not in ITEM_DATES or len(self.item_dates) >= MAX_ITEM_DATES:
            return
        value = attrs.get("content") or attrs.get("datetime")
        self.item_dates.append(ItemDate(value[:100] if value else None, block, bool(bits & FURNITURE)))

    def start(self, name: str, attrs: dict[str, str], bits: int, source: RawText) -> None:
        if name == "meta":
            self._meta(attrs)
        elif name == "link":
            if self.canonical is None and "canonical" in attrs.get("rel", "").lower().split():
                href = attrs.get("href")
                if href:
                    self.canonical = href[:MAX_VALUE_CHARS]
        elif name == "html":
            lang = attrs.get("lang") or attrs.get("xml:lang")
            if self.lang is None and lang:
                self.lang = lang[:64]
        elif name == "script":
            self._script(attrs, source)
        elif name == "time":
            self._time(attrs, bits)

    def values(self, key: str) -> list[str]:
        return self.metas.get(key, [])

    def first(self, *keys: str) -> str | None:
        for key in keys:
            values = self.metas.get(key)
            if values:
                return values[0]
        return None

    def _meta(self, attrs: dict[str, str]) -> None:
        content = attrs.get("content")
        if content is None:
            return
        for attribute in ("name", "property", "itemprop", "http-equiv"):
            key = attrs.get(attribute)
            if key:
                key = key.strip().lower()
                if key.startswith(("dc:", "dcterms:")):
                    key = key.replace(":", ".", 1)  # "DC:Title" and "DC.title" are one declaration
                self._add(key, content)

    def _add(self, key: str, content: str) -> None:
        values = self.metas.get(key)
        if values is None:
            if len(self.metas) >= MAX_KEYS or len(key) > 100:
                return
            values = self.metas[key] = []
        if len(values) < MAX_VALUES_PER_KEY:
            values.append(content[:MAX_VALUE_CHARS])

    def _script(self, attrs: dict[str, str], source: RawText) -> None:
        if (
            attrs.get("type", "").strip().lower() not in JSONLD_TYPES
            or len(self.jsonld) >= MAX_JSONLD_SCRIPTS
        ):
            return
        room = min(MAX_JSONLD_SCRIPT, MAX_JSONLD_CHARS - self.jsonld_chars)
        if room <= 0:
            return
        text = source.raw_text_ahead("script", room)
        if text is not None:  # longer than the room left: not read at all, rather than cut
            self.jsonld.append(text)
            self.jsonld_chars += len(text)

    def _time(self, attrs: dict[str, str], bits: int) -> None:
        value = attrs.get("datetime")
        if not value or len(self.times) >= MAX_TIMES:
            return
        itemprop = attrs.get("itemprop", "").lower()
        role = (
            "published"
            if "pubdate" in attrs or itemprop in ("datepublished", "datecreated")
            else "modified"
            if itemprop == "datemodified"
            else ""
        )
        self.times.append(TimeTag(value[:100], role, bool(bits & (ARTICLE | MAIN)), bool(bits & FURNITURE)))
