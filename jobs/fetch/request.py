"""A fetch_page request: its arguments, each parsed and bounded, and what a page job is about.

Every check here needs no network and costs the report nothing: a malformed argument is an
invalid request before the menu or the budget is asked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobs.facts import url_about
from jobs.reader.formats import FORMATS, MARKDOWN, TEXT
from jobs.reader.hidden import strip_invisible
from jobs.reader.pieces import needle_of
from worker.config import Settings
from worker.errors import InvalidRequest
from worker.guardian.urls import SCHEME
from worker.limits import EXTRACT_MODES, FIND_CHARS, MAX_DOCUMENT_CHARS, MAX_URL_LENGTH
from worker.state.result_records import About


@dataclass(frozen=True)
class FetchRequest:
    url: str
    extract: str
    fresh: bool
    format: str = MARKDOWN
    offset: int = 0
    max_chars: int = 40_000
    find: str | None = None  # the folded needle (pieces.needle_of), never a pattern
    render: bool = False

    @property
    def continues(self) -> bool:
        """An offset past the start, or a find: a page this report fetched is read from what was kept."""
        return self.offset > 0 or self.find is not None

    @property
    def cache_mode(self) -> str:
        """The page cache keeps one reduced page per extract mode and format (the plain text
        under the mode's own name, as before there were formats)."""
        return self.extract if self.format == TEXT else f"{self.extract}.{self.format}"

    @classmethod
    def parse(cls, args: Mapping[str, Any], *, max_chars_limit: int = 40_000) -> FetchRequest:
        url = args.get("url")
        if url is None:
            raise InvalidRequest("fetch_page needs a url")
        if not isinstance(url, str):
            raise InvalidRequest(f"url must be a string, not {type(url).__name__}")
        if not url.strip():
            raise InvalidRequest("url is empty")
        if len(url) > MAX_URL_LENGTH:
            raise InvalidRequest(f"url is longer than {MAX_URL_LENGTH:,} characters")
        if SCHEME.match(url.strip()) is None:
            # Not a URL at all ("not a url", "example.org/page"): the argument is wrong, not the
            # destination, so it is an invalid request rather than a guardian refusal.
            raise InvalidRequest("url must be an absolute https URL, such as https://example.org/page")
        extract = args.get("extract", "main")
        if extract not in EXTRACT_MODES:
            raise InvalidRequest("extract must be 'main' or 'full'")
        return cls(
            url=url.strip(),
            extract=str(extract),
            fresh=switch(args.get("fresh", False), "fresh"),
            offset=_count(args.get("offset", 0), "offset", 0, MAX_DOCUMENT_CHARS),
            max_chars=_count(args.get("max_chars", max_chars_limit), "max_chars", 1, max_chars_limit),
            find=_needle(args.get("find")),
            format=text_format(args.get("format", MARKDOWN)),
            render=switch(args.get("render", False), "render"),
        )


def _count(value: object, name: str, low: int, high: int) -> int:
    """An integer argument within [low, high]; a bool, a float or a string is not one."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRequest(f"{name} must be an integer, not {type(value).__name__}")
    if not low <= value <= high:
        raise InvalidRequest(f"{name} must be from {low:,} to {high:,}")
    return value


def _needle(value: object) -> str | None:
    """``find`` folded for the search; refused when it says nothing a reader could see."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidRequest(f"find must be a string, not {type(value).__name__}")
    low, high = FIND_CHARS
    if len(value) > high:
        raise InvalidRequest(f"find must be {low} to {high} characters")
    if "\0" in value:
        raise InvalidRequest("find must not contain a NUL character")
    visible, _ = strip_invisible(value)
    needle = needle_of(visible)
    if not needle:
        raise InvalidRequest(
            f"find must hold {low} to {high} visible characters, not only spaces or invisible ones"
        )
    return needle


def text_format(value: object) -> str:
    """``format``: one of the reader's formats (fetch_page's argument, and the render job's)."""
    if not isinstance(value, str) or value not in FORMATS:
        raise InvalidRequest("format must be 'markdown' or 'text'")
    return value


def switch(value: object, name: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidRequest(f"{name} must be true or false, not {type(value).__name__}")
    return value


class PageJob:
    """What fetch_page and the render worker's job share: a fetch's time, and one URL they are about."""

    def deadline_s(self, settings: Settings) -> float:
        return settings.fetch_deadline_s

    def about(self, arguments: Mapping[str, Any]) -> About | None:
        return url_about(arguments)
