"""Native shapes for the two big APIs, validated with the vendors' own SDK types (no network).

``call(..., shape="anthropic")`` returns a Messages API ``tool_result``'s content: one
``search_result`` block per cited source (citations enabled), a ``text`` block holding the JSON
for a fetch or an error. ``tools --format openai-responses`` is the Responses API's flat function
tool, which the Chat Completions shape is not.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiohttp import web
from anthropic.types import SearchResultBlockParam, TextBlockParam, ToolResultBlockParam
from openai.types.responses import FunctionTool, FunctionToolParam
from pydantic import TypeAdapter, ValidationError

from jobs.definitions import ToolFormat, formatted
from jobs.fetch.tool import FetchPageTool
from jobs.search import WebSearchTool
from tests.support.fake_dns import FakeResolver
from tests.support.fake_openrouter import KEY, FakeOpenRouter, completion, fake_openrouter, url_citation
from tests.support.fetching import fetch_settings
from tests.support.tls import TestCA, serve
from tests.support.workers import running_worker
from worker.client import ClientError, ResearchClient, SyncResearchClient
from worker.config import Secret, Settings
from worker.shapes import anthropic_blocks

TOOL_RESULT = TypeAdapter(ToolResultBlockParam)
BLOCK_KEYS = {
    "search_result": SearchResultBlockParam.__required_keys__ | SearchResultBlockParam.__optional_keys__,
    "text": TextBlockParam.__required_keys__ | TextBlockParam.__optional_keys__,
}


def valid_tool_result_content(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The blocks as the Messages API's tool_result content, by Anthropic's types, with no key
    the types do not know (a TypedDict alone would let one through)."""
    TOOL_RESULT.validate_python({"type": "tool_result", "tool_use_id": "toolu_01", "content": blocks})
    for block in blocks:
        assert set(block) <= BLOCK_KEYS[block["type"]], block
        for inner in block.get("content", []):
            assert set(inner) <= BLOCK_KEYS["text"] and inner["text"]
    return blocks


async def page(request: web.Request) -> web.Response:
    return web.Response(text="<title>A page</title><main><p>Some text.</p></main>", content_type="text/html")


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenRouter]:
    async with fake_openrouter() as server:
        yield server


@asynccontextmanager
async def calling(
    settings: Settings, ca: TestCA, fake: FakeOpenRouter, token: str
) -> AsyncIterator[ResearchClient]:
    s = fetch_settings(
        settings,
        ca,
        openrouter_base_url=fake.base_url,
        openrouter_api_key=Secret(KEY),
        usage_source=f"src-{token}",
    )
    async with (
        running_worker(s, [FetchPageTool(FakeResolver({})), WebSearchTool()]),
        ResearchClient(settings=s, job_id_prefix=f"{token}-", wait_s=20) as client,
    ):
        yield client


async def test_a_search_becomes_one_cited_search_result_block_per_source(
    settings: Settings, ca: TestCA, fake: FakeOpenRouter, token: str, report: str
) -> None:
    fake.will(
        completion(
            [
                url_citation("https://example.org/a", "Tidal output 2024", "Output rose by a tenth."),
                url_citation("https://example.org/b", "", ""),  # a source with no title and no snippet
            ]
        )
    )
    async with calling(settings, ca, fake, token) as client:
        blocks = await client.call("web_search", {"query": "tidal"}, report_id=report, shape="anthropic")
    valid_tool_result_content(blocks)
    assert [b["type"] for b in blocks] == ["search_result", "search_result"]
    first, second = blocks
    assert (first["source"], first["title"]) == ("https://example.org/a", "Tidal output 2024")
    assert first["content"] == [{"type": "text", "text": "Output rose by a tenth."}]
    assert first["citations"] == {"enabled": True}
    assert second["title"] == second["source"] == "https://example.org/b"


async def test_a_fetch_and_an_error_become_one_text_block_holding_the_json(
    settings: Settings, ca: TestCA, fake: FakeOpenRouter, token: str, report: str
) -> None:
    async with serve({"/": page}, ca.server_context()) as site, calling(settings, ca, fake, token) as client:
        fetched = await client.call("fetch_page", {"url": site.url("/")}, report_id=report, shape="anthropic")
        refused = await client.call("fetch_page", {"url": "http://x/"}, report_id=report, shape="anthropic")
        unknown = await client.call("nope", {}, report_id=report, shape="anthropic")
    for blocks in (fetched, refused, unknown):
        valid_tool_result_content(blocks)
        assert [b["type"] for b in blocks] == ["text"]
    assert json.loads(fetched[0]["text"])["title"] == "A page"
    assert json.loads(refused[0]["text"])["error"]["kind"] == "scheme_not_allowed"
    assert json.loads(unknown[0]["text"])["error"]["kind"] == "invalid_request"


def test_an_empty_search_is_a_text_block_not_an_empty_list() -> None:
    empty = {"ok": True, "tool": "web_search", "report_id": "r", "job_id": "j", "query": "q", "results": []}
    blocks = valid_tool_result_content(anthropic_blocks(empty))
    assert [b["type"] for b in blocks] == ["text"] and json.loads(blocks[0]["text"]) == empty


async def test_an_unknown_shape_is_the_orchestrators_mistake(settings: Settings, report: str) -> None:
    async with ResearchClient(settings=settings, wait_s=1) as client:
        with pytest.raises(ClientError, match="shape must be one of json, anthropic"):
            await client.call("fetch_page", {}, report_id=report, shape="langchain")  # type: ignore[call-overload]


def test_the_responses_format_validates_with_openais_function_tool_types() -> None:
    listing = formatted(Settings(), ToolFormat.OPENAI_RESPONSES)
    param = TypeAdapter(FunctionToolParam)
    for tool in listing:
        param.validate_python(tool)
        model = FunctionTool.model_validate(tool)
        assert set(tool) <= set(FunctionTool.model_fields)  # no key the API does not know
        assert (model.name, model.parameters, model.strict) == (tool["name"], tool["parameters"], False)
    assert [t["name"] for t in listing] == ["web_search", "fetch_page", "cite"]


def test_the_chat_completions_shape_is_not_a_responses_function_tool() -> None:
    # What the newcomer's run hit: the Responses API refuses the nested Chat Completions shape.
    for tool in formatted(Settings(), ToolFormat.OPENAI):
        with pytest.raises(ValidationError):
            FunctionTool.model_validate(tool)


def test_the_responses_format_carries_the_same_schema_as_every_other_format() -> None:
    settings = dataclasses.replace(Settings(), fetch_budget=7)
    responses = formatted(settings, ToolFormat.OPENAI_RESPONSES)
    anthropic = formatted(settings, ToolFormat.ANTHROPIC)
    assert [(t["name"], t["description"], t["parameters"]) for t in responses] == [
        (t["name"], t["description"], t["input_schema"]) for t in anthropic
    ]


def test_the_blocking_twin_returns_the_same_blocks(settings: Settings, report: str) -> None:
    with SyncResearchClient(settings=settings, wait_s=1) as client:
        blocks = client.call("nope", {}, report_id=report, shape="anthropic")
        text = client.call("nope", {}, report_id=report)
    valid_tool_result_content(blocks)
    assert json.loads(blocks[0]["text"])["error"] == json.loads(text)["error"]
