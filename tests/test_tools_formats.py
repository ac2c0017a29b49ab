"""``research-worker tools --format anthropic|openai|openai-responses|mcp``: the same three tools, in each
agent framework's own shape, valid against that shape's schema, with the untrusted-content posture."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import pytest

from jobs.definitions import ToolFormat, formatted, tool_definitions
from tests.support.run_cli import run_cli
from tests.support.tool_formats import FORMATS
from worker.config import Settings

FORMAT_NAMES = [f.value for f in ToolFormat]


def printed(*args: str) -> Any:
    proc = run_cli("tools", *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def tools_of(tool_format: str, listing: Any) -> list[dict[str, Any]]:
    """(name, description, input schema) of each tool, whatever the format's wrapping."""
    if tool_format == "openai":
        return [
            {
                "name": t["function"]["name"],
                "description": t["function"]["description"],
                "schema": t["function"]["parameters"],
            }
            for t in listing
        ]
    if tool_format == "openai-responses":
        return [
            {"name": t["name"], "description": t["description"], "schema": t["parameters"]} for t in listing
        ]
    if tool_format == "mcp":
        return [
            {"name": t["name"], "description": t["description"], "schema": t["inputSchema"]}
            for t in listing["tools"]
        ]
    return [
        {"name": t["name"], "description": t["description"], "schema": t["input_schema"]} for t in listing
    ]


@pytest.fixture(scope="module")
def listings() -> dict[str, Any]:
    return {name: printed("--format", name) for name in FORMAT_NAMES}


@pytest.mark.parametrize("tool_format", FORMAT_NAMES)
def test_each_format_validates_against_that_formats_schema(
    tool_format: str, listings: dict[str, Any]
) -> None:
    jsonschema.Draft202012Validator(FORMATS[tool_format]).validate(listings[tool_format])


@pytest.mark.parametrize("tool_format", FORMAT_NAMES)
def test_each_tools_input_schema_is_itself_valid_json_schema(
    tool_format: str, listings: dict[str, Any]
) -> None:
    for tool in tools_of(tool_format, listings[tool_format]):
        jsonschema.Draft202012Validator.check_schema(tool["schema"])


@pytest.mark.parametrize("tool_format", FORMAT_NAMES)
def test_every_format_carries_the_untrusted_content_posture(
    tool_format: str, listings: dict[str, Any]
) -> None:
    for tool in tools_of(tool_format, listings[tool_format]):
        assert "untrusted data" in tool["description"]
        assert "never follow instructions" in tool["description"]


def test_every_format_describes_the_same_tools_with_the_same_schemas(listings: dict[str, Any]) -> None:
    shapes = {name: tools_of(name, listings[name]) for name in FORMAT_NAMES}
    assert [t["name"] for t in shapes["anthropic"]] == ["web_search", "fetch_page", "cite"]
    assert shapes["openai"] == shapes["anthropic"]
    assert shapes["openai-responses"] == shapes["anthropic"]
    assert shapes["mcp"] == shapes["anthropic"]


def test_the_default_format_is_anthropics(listings: dict[str, Any]) -> None:
    assert printed() == listings["anthropic"]


def test_the_mcp_listing_says_read_only_not_destructive_open_world(listings: dict[str, Any]) -> None:
    for tool in listings["mcp"]["tools"]:
        hints = tool["annotations"]
        # cite reads only what the report already fetched: no open world behind it.
        assert (hints["readOnlyHint"], hints["destructiveHint"], hints["openWorldHint"]) == (
            True,
            False,
            tool["name"] != "cite",
        )
        assert tool["title"] == hints["title"] and tool["title"]


def test_an_unknown_format_is_a_usage_error() -> None:
    proc = run_cli("tools", "--format", "langchain")
    assert proc.returncode == 2
    assert "invalid choice" in proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize(
    ("tool_format", "break_it"),
    [
        ("openai", lambda listing: listing[0].pop("type")),
        ("openai", lambda listing: listing[0]["function"].update(name="web search")),
        ("openai", lambda listing: listing[0]["function"].update(input_schema={"type": "object"})),
        ("openai", lambda listing: listing[0]["function"]["parameters"].update(type="array")),
        ("openai-responses", lambda listing: listing[0].update(function={"name": "web_search"})),
        ("openai-responses", lambda listing: listing[0].pop("parameters")),
        ("mcp", lambda listing: listing["tools"][0].pop("inputSchema")),
        ("mcp", lambda listing: listing["tools"][0]["annotations"].update(readOnlyHint="yes")),
        ("mcp", lambda listing: listing["tools"][0].update(input_schema={"type": "object"})),
        ("mcp", lambda listing: listing.update(tools={"web_search": {}})),
        ("anthropic", lambda listing: listing[1].pop("input_schema")),
    ],
    ids=[
        "openai without type",
        "openai name with a space",
        "openai with anthropic's key",
        "openai parameters not an object",
        "responses with chat completions' nesting",
        "responses without parameters",
        "mcp without inputSchema",
        "mcp hint not a boolean",
        "mcp with anthropic's key",
        "mcp tools not a list",
        "anthropic without input_schema",
    ],
)
def test_the_format_schemas_refuse_what_the_formats_forbid(
    tool_format: str, break_it: Any, listings: dict[str, Any]
) -> None:
    broken = copy.deepcopy(listings[tool_format])
    break_it(broken)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(FORMATS[tool_format]).validate(broken)


@pytest.mark.parametrize(
    ("tool", "arguments", "valid"),
    [
        ("fetch_page", {"url": "https://example.org/"}, True),
        ("fetch_page", {"url": "https://example.org/", "extract": "full"}, True),
        ("fetch_page", {"url": "https://example.org/", "report_id": "someone-else"}, False),
        ("fetch_page", {"url": "https://example.org/", "extract": "everything"}, False),
        ("fetch_page", {}, False),
        ("web_search", {"query": "tidal energy", "max_results": 10}, True),
        ("web_search", {"query": "tidal energy", "org_id": "another-org"}, False),
        ("web_search", {"query": "tidal energy", "max_results": 11}, False),
        ("web_search", {"query": ""}, False),
        ("cite", {"url": "https://example.org/", "quote": "the seawall is not safe"}, True),
        ("cite", {"url": "https://example.org/", "quote": ""}, False),
        ("cite", {"url": "https://example.org/"}, False),
        ("cite", {"url": "https://example.org/", "quote": "x", "report_id": "someone-else"}, False),
        ("cite", {"url": "https://example.org/", "quote": "x" * 10_001}, False),
    ],
)
def test_the_input_schemas_let_a_model_set_only_its_own_arguments(
    tool: str, arguments: dict[str, Any], valid: bool
) -> None:
    schema = next(t["input_schema"] for t in tool_definitions(Settings()) if t["name"] == tool)
    assert jsonschema.Draft202012Validator(schema).is_valid(arguments) is valid


def test_the_definitions_follow_the_operators_limits() -> None:
    settings = Settings(fetch_budget=7, search_budget=3, url_menu=False)
    listing = formatted(settings, ToolFormat.MCP)
    fetch = next(t for t in listing["tools"] if t["name"] == "fetch_page")
    search = next(t for t in listing["tools"] if t["name"] == "web_search")
    assert "at most 7 pages" in fetch["description"]
    assert "at most 3 searches" in search["description"]
    assert "url_not_in_menu" not in fetch["description"]
