"""The tools' output schemas (``jobs/output_schemas.py``) refuse what is not a result of that tool.

Real results are validated against them where they are made (tests/test_mcp_http.py,
tests/test_mcp_stdio.py); this table shows the schemas are not vacuous.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonschema
import pytest

from jobs.output_schemas import output_schema

FETCHED: dict[str, Any] = {
    "ok": True,
    "tool": "fetch_page",
    "report_id": "r-1",
    "job_id": "j",
    "url": "https://example.org/",
    "final_url": "https://example.org/",
    "status": 200,
    "content_type": "text/html",
    "title": "A page",
    "text": "Some text.",
    "truncated": False,
    "links": [],
    "a_field_added_later": {"any": "shape"},
}
FOUND: dict[str, Any] = {
    "ok": True,
    "tool": "web_search",
    "report_id": "r-1",
    "job_id": "j",
    "query": "q",
    "provider": "openrouter-plugin",
    "results": [{"title": "t", "url": "https://example.org/", "snippet": "s"}],
}
REFUSED: dict[str, Any] = {
    "ok": False,
    "tool": "fetch_page",
    "report_id": None,
    "job_id": "j",
    "error": {"kind": "invalid_request", "message": "m"},
}


def valid(tool: str, value: dict[str, Any]) -> bool:
    return jsonschema.Draft202012Validator(output_schema(tool)).is_valid(value)


def changed(value: dict[str, Any], **changes: Any) -> dict[str, Any]:
    out = copy.deepcopy(value)
    for key, new in changes.items():
        if new is ...:
            out.pop(key)
        else:
            out[key] = new
    return out


def test_results_of_each_shape_are_valid_and_fields_added_later_do_not_break_them() -> None:
    assert valid("fetch_page", FETCHED)
    assert valid("web_search", FOUND)
    assert valid("fetch_page", REFUSED) and valid("web_search", {**REFUSED, "tool": "web_search"})


@pytest.mark.parametrize(
    ("tool", "value"),
    [
        ("fetch_page", changed(FETCHED, ok="yes")),
        ("fetch_page", changed(FETCHED, url=...)),
        ("fetch_page", changed(FETCHED, text=None)),
        ("fetch_page", changed(FETCHED, status="200")),
        ("fetch_page", changed(FETCHED, links="https://example.org/")),
        ("fetch_page", changed(FETCHED, tool="web_search")),
        ("fetch_page", FOUND),
        ("web_search", FETCHED),
        ("web_search", changed(FOUND, results={"title": "t"})),
        ("web_search", changed(FOUND, results=[{"title": "t", "url": "u"}])),
        ("web_search", changed(FOUND, query=...)),
        ("fetch_page", changed(REFUSED, error={"kind": "invalid_request"})),
        ("fetch_page", changed(REFUSED, error="invalid_request")),
        ("fetch_page", changed(REFUSED, job_id=...)),
        ("fetch_page", changed(REFUSED, ok=True)),
        ("fetch_page", {}),
    ],
)
def test_what_is_not_a_result_of_the_tool_is_refused(tool: str, value: dict[str, Any]) -> None:
    assert not valid(tool, value)


@pytest.mark.parametrize("tool", ["web_search", "fetch_page", "cite"])
def test_each_output_schema_is_valid_json_schema_with_an_object_at_the_top(tool: str) -> None:
    schema = output_schema(tool)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["type"] == "object"
