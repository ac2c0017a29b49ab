"""The tools' output schemas (``jobs/output_schemas.py``) refuse what is not a result of that tool,
and real results of every shape validate against them, naming no field the schema does not.

Real results are validated against them where they are made too (tests/test_mcp_http.py,
tests/test_mcp_stdio.py); the table shows the schemas are not vacuous.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonschema
import pytest
from aiohttp import web

from jobs.output_schemas import output_schema
from tests.support.fetching import fetch_settings, fetching
from tests.support.pdfs import text_pdf
from tests.support.tls import TestCA, serve
from worker.config import Settings
from worker.state.result_records import Head, OkResult, SearchFields, as_json

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


ARTICLE = (
    "<html lang=en><head><title>Field notes</title><meta name=description content='Notes.'>"
    "<meta name=author content='A. Writer'></head><body><main><h1>Field notes</h1>"
    + "".join(
        f"<p>Paragraph {n} says the tide came in at dawn, <a href='/p{n}'>more</a>.</p>" for n in range(40)
    )
    + "</main></body></html>"
)
PDF = text_pdf("A report. The tide came in at dawn.", "Page two: the tide went out.", title="Tides")


def unnamed(value: object, schema: dict[str, Any], at: str = "") -> list[str]:
    """The fields ``value`` carries that ``schema`` (an object's, or an array's) does not name."""
    if isinstance(value, list):
        items = schema.get("items", {})
        return [name for item in value for name in unnamed(item, items, at + "[]")]
    if not isinstance(value, dict) or "additionalProperties" in schema:
        return []
    properties = schema.get("properties", {})
    missing = [at + key for key in value if key not in properties]
    return missing + [
        name
        for key, item in value.items()
        if key in properties
        for name in unnamed(item, properties[key], at + key + ".")
    ]


def branch(tool: str, result: dict[str, Any]) -> dict[str, Any]:
    ok, error = output_schema(tool)["oneOf"]
    return ok if result["ok"] else error


async def test_real_results_of_every_shape_validate_and_name_no_field_the_schema_lacks(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    async def article(request: web.Request) -> web.Response:
        return web.Response(text=ARTICLE, content_type="text/html")

    async def pdf(request: web.Request) -> web.Response:
        return web.Response(body=PDF, content_type="application/pdf")

    async def gone(request: web.Request) -> web.Response:
        return web.Response(status=404, text="no")

    async def viewer(request: web.Request) -> web.Response:
        body = '<html><body><main><p>The report.</p><iframe src="/doc.pdf"></iframe></main></body></html>'
        return web.Response(text=body, content_type="text/html")

    routes = {"/article": article, "/doc.pdf": pdf, "/gone": gone, "/viewer": viewer}
    async with (
        serve(routes, ca.server_context()) as server,
        fetching(fetch_settings(settings, ca), token, report) as h,
    ):
        page, doc = server.url("/article"), server.url("/doc.pdf")
        results = {
            "markdown": await h.client.fetch(report, page, format="markdown"),
            "text": await h.client.fetch(report, page, "main", format="text", max_chars=300),
            "pdf": await h.client.fetch(report, doc, format="text"),
            "piece": await h.client.fetch(report, page, "main", format="text", offset=300, max_chars=300),
            "find": await h.client.fetch(report, page, "main", format="markdown", find="tide came in"),
            "pdf_find": await h.client.fetch(report, doc, format="text", find="a"),
            "embedding": await h.client.fetch(report, server.url("/viewer")),
            "error": await h.client.fetch(report, server.url("/gone")),
        }
    searched = OkResult(
        Head("web_search", report, "j"),
        SearchFields("tides", ({"title": "t", "url": page, "snippet": "s"},), "searxng", None),
    )
    # The oracle for each shape: what the contract says that shape carries.
    assert all(results[name]["ok"] for name in ("markdown", "text", "pdf", "piece", "find", "pdf_find"))
    assert all(match["page"] >= 1 for match in results["pdf_find"]["matches"])
    assert results["embedding"]["documents"] == [doc]
    assert results["markdown"]["format"] == "markdown" and results["text"]["format"] == "text"
    assert results["pdf"]["pages"] == 2 and results["pdf"]["page_offsets"][0] == 0
    assert results["piece"]["offset"] == 300 and results["find"]["matches"]
    assert results["markdown"]["metadata"]["description"] == "Notes."
    assert results["error"]["ok"] is False and results["error"]["error"]["kind"] == "http_status"
    results["search"] = dict(as_json(searched))
    for name, result in results.items():
        tool = "web_search" if name == "search" else "fetch_page"
        jsonschema.Draft202012Validator(output_schema(tool)).validate(result)
        assert unnamed(result, branch(tool, result)) == [], name
