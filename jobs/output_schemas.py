"""JSON schemas of what each tool returns: an ok result of that tool, or an error result.

An MCP server lists them as each tool's ``outputSchema`` and sends every result, error results
included, as ``structuredContent`` that conforms. They are generated from the result records
(``worker.state.result_records`` and the ``Page`` it holds) by the same field marks the results
are written by, so a field is declared once: a field the page cache keeps for itself is not in
them, and one a result leaves out while unset is never null in them. They pin the fields an agent
relies on and leave each object open (``additionalProperties``), so a field a tool gains later does
not break a client that validates; the tests validate real results against them.
"""

from __future__ import annotations

import dataclasses
import functools
import types
from typing import Final, Union, cast, get_args, get_origin, get_type_hints, is_typeddict

from worker.limits import CITE, FETCH_PAGE, WEB_SEARCH
from worker.serialization import JsonObject, JsonValue
from worker.state.pages.entry import CACHE_ONLY, WHEN_SET, Page
from worker.state.result_records import (
    HEAD,
    PAGE_DERIVED,
    SEARCH_DERIVED,
    CitationCheck,
    ErrorResult,
    FetchFields,
    Head,
    SearchFields,
    TextPiece,
)

JSON_TYPES: Final = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"))
# Only what every ok result has (a fetch's continuations and passages included) is required: a
# client that validates refuses the whole result when a required field is missing.
REQUIRED: Final = {
    FETCH_PAGE: ("url", "text"),
    WEB_SEARCH: ("query", "results"),
    CITE: ("url", "quote", "status"),
}
# A search's wire fields (``SearchFields.asked`` only says whether the archive's are written).
SEARCH_FIELDS: Final = ("query", "provider", "results", "archive_record")


def type_schema(hint: object, *, nullable: bool = True) -> JsonObject:
    """The schema of a JSON value of the declared type; ``nullable`` False for a field a result
    leaves out while it is None (so it is never null there)."""
    origin, args = get_origin(hint), get_args(hint)
    if origin in (types.UnionType, Union):
        kept = [arg for arg in args if arg is not type(None)]
        (only,) = kept  # a field is one type, or that type or None
        inner = type_schema(only)
        if not nullable or len(kept) == len(args):
            return inner
        return {**inner, "type": [inner["type"], "null"]}
    if isinstance(hint, type):
        for kind, name in JSON_TYPES:
            if issubclass(hint, kind):  # an enum of strings is a string
                return {"type": name}
    if origin in (tuple, list):
        return {"type": "array", "items": type_schema(args[0])}
    if origin is dict:
        return {"type": "object", "additionalProperties": type_schema(args[1])}
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        properties = record_properties(hint)
        # A field left out while it is unset (WHEN_SET) is not required.
        optional = {f.name for f in dataclasses.fields(hint) if f.metadata.get(WHEN_SET)}
        needs: list[JsonValue] = [name for name in properties if name not in optional]
        return {"type": "object", "required": needs, "properties": properties}
    if is_typeddict(hint):
        hints = get_type_hints(hint)
        properties = {name: type_schema(of) for name, of in hints.items()}
        needed: frozenset[str] = getattr(hint, "__required_keys__", frozenset())
        required: list[JsonValue] = [name for name in hints if name in needed]
        return {"type": "object", "required": required, "properties": properties}
    raise TypeError(f"no JSON schema for a field of type {hint}")


def record_properties(record: type) -> JsonObject:
    """A record's fields as a result writes them (``result_records._declared_json``): not the
    cache's own, and not null when left out while unset."""
    hints = get_type_hints(record)
    return {
        declared.name: type_schema(hints[declared.name], nullable=not declared.metadata.get(WHEN_SET))
        for declared in dataclasses.fields(record)
        if not declared.metadata.get(CACHE_ONLY)
    }


def named(record: type, *names: str, nullable: bool = True) -> JsonObject:
    hints = get_type_hints(record)
    return {name: type_schema(hints[name], nullable=nullable) for name in names}


def head(tool: str | None) -> JsonObject:
    """A result's head: an ok result's names its tool and its report; an error result's may name
    no report (a job refused for its report id)."""
    if tool is None:
        return {"ok": {"const": False}, **record_properties(Head)}
    return {
        "ok": {"const": True},
        "tool": {"const": tool},
        **named(Head, "report_id", "job_id", nullable=False),
    }


def ok_schema(tool: str, properties: JsonObject) -> JsonObject:
    return {"type": "object", "required": [*HEAD, *REQUIRED[tool]], "properties": properties}


@functools.cache
def fetch_page_ok() -> JsonObject:
    return ok_schema(
        FETCH_PAGE,
        {
            **head(FETCH_PAGE),
            **record_properties(Page),
            **{name: type_schema(kind) for name, kind in PAGE_DERIVED.items()},
            **named(FetchFields, "cached"),
            **record_properties(TextPiece),
            **named(FetchFields, "refetched"),
        },
    )


@functools.cache
def web_search_ok() -> JsonObject:
    return ok_schema(
        WEB_SEARCH,
        {
            **head(WEB_SEARCH),
            **named(SearchFields, *SEARCH_FIELDS),
            **{name: type_schema(kind) for name, kind in SEARCH_DERIVED.items()},
        },
    )


@functools.cache
def cite_ok() -> JsonObject:
    properties = cast(JsonObject, type_schema(CitationCheck)["properties"])
    return ok_schema(CITE, {**head(CITE), **properties})


@functools.cache
def error_result() -> JsonObject:
    needed: list[JsonValue] = ["kind", "message"]
    error: JsonObject = {
        "type": "object",
        "required": needed,
        "properties": named(ErrorResult, "kind", "message"),
    }
    # url and query are left out while unset; status is said (null when unknown) for http_status.
    properties: JsonObject = {
        **head(None),
        "error": error,
        **named(ErrorResult, "url", "query", nullable=False),
        **named(ErrorResult, "status"),
    }
    required: list[JsonValue] = [*HEAD, "error"]
    return {"type": "object", "required": required, "properties": properties}


def output_schema(tool: str) -> JsonObject:
    """The schema of everything ``tool`` returns: its ok result or an error result."""
    ok = {WEB_SEARCH: web_search_ok, FETCH_PAGE: fetch_page_ok, CITE: cite_ok}[tool]()
    # MCP wants an object schema at the top; the two branches are told apart by ``ok``.
    return {"type": "object", "oneOf": [ok, error_result()]}
