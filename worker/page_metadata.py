"""The shape of a fetch_page result's ``metadata``: who wrote a page, when, where, as it declares.

The reader (jobs/reader/metadata) builds it; the page cache keeps it and reads it back here,
checked field by field, since Redis is shared state: a value of the wrong shape is no metadata at
all, never an exception.
"""

from __future__ import annotations

from typing import TypedDict

TEXT_FIELDS = (
    "headline",
    "published",
    "modified",
    "site_name",
    "language",
    "description",
    "canonical_url",
    "type",
    "doi",
)
FIELDS = (*TEXT_FIELDS, "author")
SOURCES = frozenset(
    {
        "json-ld",
        "opengraph",
        "meta",
        "highwire",
        "dublin-core",
        "time",
        "html",
        "url",
        "byline",
        "pdf-info",
        "xmp",
    }
)


class PageMetadata(TypedDict):
    headline: str | None
    published: str | None  # ISO 8601: a date, or a date and time (with its zone when declared)
    modified: str | None
    author: list[str]
    site_name: str | None
    language: str | None  # a BCP 47 tag
    description: str | None
    canonical_url: str | None  # canonical https
    type: str | None
    doi: str | None  # bare: 10.1000/xyz
    sources: dict[str, str]  # each non-null field (and author when not empty) to where it was read


def empty() -> PageMetadata:
    return {
        "headline": None,
        "published": None,
        "modified": None,
        "author": [],
        "site_name": None,
        "language": None,
        "description": None,
        "canonical_url": None,
        "type": None,
        "doi": None,
        "sources": {},
    }


def parse(value: object) -> PageMetadata | None:
    """``value`` as metadata when it has exactly the shape above, else None."""
    if not isinstance(value, dict) or set(value) != {*FIELDS, "sources"}:
        return None
    if not all(value[name] is None or isinstance(value[name], str) for name in TEXT_FIELDS):
        return None
    author, sources = value["author"], value["sources"]
    if not isinstance(author, list) or not all(isinstance(name, str) for name in author):
        return None
    if not isinstance(sources, dict) or not all(
        field in FIELDS and isinstance(source, str) and source in SOURCES for field, source in sources.items()
    ):
        return None
    metadata = empty()
    for name in TEXT_FIELDS:
        metadata[name] = value[name]  # type: ignore[literal-required]
    metadata["author"] = list(author)
    metadata["sources"] = dict(sources)
    return metadata
