"""The page's query parameters: filters by outcome, tool and report, and the page of results.

They arrive from whoever can load the page, so each is checked against the shape its values take
(an outcome kind, a tool name, a report id) and refused with a sentence naming the parameter.
Links are built here, from checked values only, and point at the dashboard's own paths.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Generic, Protocol, TypeVar
from urllib.parse import quote, urlencode

from worker.limits import REPORT_ID

PAGE_SIZE = 50
MAX_PAGE = 10_000
OUTCOME = re.compile(r"[a-z_]{1,60}")
TOOL = re.compile(r"[A-Za-z0-9_]{1,60}")


class BadFilter(ValueError):
    """A query parameter the dashboard cannot use; the message names it and what it must be."""


class Row(Protocol):
    @property
    def tool(self) -> str: ...

    @property
    def report_id(self) -> str: ...


class ResultRow(Row, Protocol):
    @property
    def outcome(self) -> str: ...


@dataclass(frozen=True)
class Filters:
    outcome: str | None = None
    tool: str | None = None
    report: str | None = None
    page: int = 1

    @classmethod
    def parse(cls, query: Mapping[str, str]) -> Filters:
        return cls(
            outcome=_checked(query, "outcome", OUTCOME, "an outcome kind such as ok or http_status"),
            tool=_checked(query, "tool", TOOL, "a tool name such as fetch_page"),
            report=_checked(
                query, "report", REPORT_ID, "a report id (letters, digits and - _ . :, at most 200)"
            ),
            page=_page(query.get("page")),
        )

    @property
    def active(self) -> bool:
        return any((self.outcome, self.tool, self.report))

    def as_query(self) -> dict[str, str]:
        shown = {"outcome": self.outcome, "tool": self.tool, "report": self.report}
        query = {name: value for name, value in shown.items() if value}
        if self.page != 1:
            query["page"] = str(self.page)
        return query

    def href(self, **changes: str | int | None) -> str | None:
        """A link to the front page with these filters changed (any filter change goes to page 1),
        or None when a value could not be a filter (a report id that is not one, say)."""
        changed = replace(self, **changes)  # type: ignore[arg-type]
        if "page" not in changes:
            changed = replace(changed, page=1)
        query = changed.as_query()
        try:
            Filters.parse(query)
        except BadFilter:
            return None
        return "/?" + urlencode(query, quote_via=quote) if query else "/"

    def matches(self, row: Row) -> bool:
        return (self.tool is None or row.tool == self.tool) and (
            self.report is None or row.report_id == self.report
        )

    def matches_result(self, row: ResultRow) -> bool:
        return self.matches(row) and (self.outcome is None or row.outcome == self.outcome)


T = TypeVar("T", bound=ResultRow)


@dataclass(frozen=True)
class Paged(Generic[T]):
    rows: list[T]
    number: int
    pages: int
    matching: int
    size: int


def paginate(rows: Sequence[T], filters: Filters) -> Paged[T]:
    matching = [row for row in rows if filters.matches_result(row)]
    pages = max(1, math.ceil(len(matching) / PAGE_SIZE))
    start = (filters.page - 1) * PAGE_SIZE
    return Paged(matching[start : start + PAGE_SIZE], filters.page, pages, len(matching), PAGE_SIZE)


def outcome_counts(rows: Sequence[ResultRow], filters: Filters) -> dict[str, int]:
    """Outcomes among the rows the other filters keep: the chips that narrow the list further."""
    counts = Counter(row.outcome for row in rows if filters.matches(row))
    return dict(counts.most_common())


def job_href(job_id: str) -> str:
    """Every character of a job id is escaped into one path segment: an id can never leave /job/."""
    return "/job/" + quote(job_id, safe="")


def _checked(query: Mapping[str, str], name: str, shape: re.Pattern[str], what: str) -> str | None:
    value = query.get(name)
    if value is None or value == "":
        return None
    if not shape.fullmatch(value):
        raise BadFilter(f"the {name} filter must be {what}")
    return value


def _page(value: str | None) -> int:
    if value is None or value == "":
        return 1
    if not (len(value) <= 6 and value.isascii() and value.isdigit() and 1 <= int(value) <= MAX_PAGE):
        raise BadFilter(f"page must be a whole number from 1 to {MAX_PAGE}")
    return int(value)
