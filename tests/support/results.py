"""Results as the tests build them by hand: the records of worker.state.result_records, as JSON."""

from __future__ import annotations

from typing import Any

from worker.serialization import JsonObject
from worker.state.pages.entry import Page
from worker.state.result_records import (
    RENDER_PAGE,
    FetchFields,
    Head,
    OkResult,
    OtherFields,
    as_json,
    parse_object,
)


def ok_result(tool: str, report_id: str, job_id: str, fields: dict[str, Any]) -> OkResult:
    """The ok result of a tool outside the contract (the test tools'), with these fields."""
    return OkResult(Head(tool, report_id, job_id), OtherFields(fields))


def ok_json(tool: str, report_id: str, job_id: str, fields: dict[str, Any]) -> JsonObject:
    return as_json(ok_result(tool, report_id, job_id, fields))


def page_fields(page: Page, *, cached: bool) -> JsonObject:
    """A render worker's result for ``page``, as it is written."""
    return as_json(OkResult(Head(RENDER_PAGE, "r-1", "j-1"), FetchFields(page, cached)))


def page_from_fields(fields: JsonObject) -> Page | None:
    """The page a render worker's result holds, read back as the fetch worker reads it; None when it
    is not one."""
    result = parse_object(fields)
    if isinstance(result, OkResult) and isinstance(result.fields, FetchFields):
        return result.fields.page
    return None
