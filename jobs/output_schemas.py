"""JSON schemas of what each tool returns: an ok result of that tool, or an error result.

An MCP server lists them as each tool's ``outputSchema`` and sends every result, error results
included, as ``structuredContent`` that conforms. They pin the fields an agent relies on and
leave the object open (``additionalProperties``), so a field a tool gains later does not break a
client that validates; the tests validate real results against them.
"""

from __future__ import annotations

from typing import Any, Final

NULLABLE_STRING: Final = {"type": ["string", "null"]}

ERROR_RESULT: Final[dict[str, Any]] = {
    "type": "object",
    "required": ["ok", "tool", "report_id", "job_id", "error"],
    "properties": {
        "ok": {"const": False},
        "tool": {"type": "string"},
        "report_id": NULLABLE_STRING,
        "job_id": {"type": "string"},
        "error": {
            "type": "object",
            "required": ["kind", "message"],
            "properties": {"kind": {"type": "string"}, "message": {"type": "string"}},
        },
        "url": {"type": "string"},
        "query": {"type": "string"},
        "status": {"type": ["integer", "null"]},
    },
}

HEAD: Final[dict[str, Any]] = {
    "ok": {"const": True},
    "report_id": {"type": "string"},
    "job_id": {"type": "string"},
}

WEB_SEARCH_OK: Final[dict[str, Any]] = {
    "type": "object",
    "required": ["ok", "tool", "report_id", "job_id", "query", "results"],
    "properties": {
        **HEAD,
        "tool": {"const": "web_search"},
        "query": {"type": "string"},
        "provider": {"type": "string"},
        "results": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["title", "url", "snippet"],
                "properties": {
                    "title": {"type": "string"},
                    "url": {"type": "string"},
                    "snippet": {"type": "string"},
                },
            },
        },
    },
}

# Only what every ok fetch has, continuations and passages included, is required: a client that
# validates refuses the whole result when a required field is missing.
FETCH_PAGE_OK: Final[dict[str, Any]] = {
    "type": "object",
    "required": ["ok", "tool", "report_id", "job_id", "url", "text"],
    "properties": {
        **HEAD,
        "tool": {"const": "fetch_page"},
        "url": {"type": "string"},
        "final_url": {"type": "string"},
        "status": {"type": "integer"},
        "content_type": {"type": "string"},
        "title": NULLABLE_STRING,
        "text": {"type": "string"},
        "truncated": {"type": "boolean"},
        "redirects": {"type": "integer"},
        "bytes_read": {"type": "integer"},
        "fetched_at": {"type": "string"},
        "extraction": {"type": "string"},
        "links": {"type": "array", "items": {"type": "string"}},
        "hidden_removed": {"type": "integer"},
        "cached": {"type": "boolean"},
        "pages": {"type": "integer"},
        "pages_read": {"type": "integer"},
        "format": {"type": "string"},
        "offset": {"type": "integer"},
        "total_chars": {"type": "integer"},
        "next_offset": {"type": ["integer", "null"]},
        "matches": {"type": "array", "items": {"type": "object"}},
        "page_offsets": {"type": "array", "items": {"type": "integer"}},
        "metadata": {"type": ["object", "null"]},
        "sha256": NULLABLE_STRING,
        "archived": {"type": "boolean"},
        "archive_record": NULLABLE_STRING,
        "screenshot_record": NULLABLE_STRING,
        "rendered": {"type": "boolean"},
        "script_shell": {"type": "boolean"},
        "refetched": {"type": "boolean"},
    },
}


def output_schema(tool: str) -> dict[str, Any]:
    """The schema of everything ``tool`` returns: its ok result or an error result."""
    ok = {"web_search": WEB_SEARCH_OK, "fetch_page": FETCH_PAGE_OK}[tool]
    # MCP wants an object schema at the top; the two branches are told apart by ``ok``.
    return {"type": "object", "oneOf": [ok, ERROR_RESULT]}
