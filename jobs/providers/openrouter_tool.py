"""``openrouter-tool``: OpenRouter's ``openrouter:web_search`` server tool (beta), in the ``tools`` array.

With a server tool the model decides whether and how often to search, and OpenRouter runs each
search it asks for. So the request bounds it three ways: a system message tells the model to
search once, for the query exactly as given; ``max_results`` (per search) and
``max_total_results`` (across all the searches of the request) are both the job's
``max_results``, so one job can never buy more results than it asked for; and the engine is the
operator's (``RESEARCH_SEARCH_ENGINE``; unset lets OpenRouter choose, which it documents as
``auto``). ``tool_choice`` is not forced: a forced server tool may be called again on every turn
of OpenRouter's loop, and each call is billed.

What comes back is read like the plugin's answer: only its ``url_citation`` annotations. Where the
documentation is silent, the worker assumes and handles both readings:

- a model that searched but cited nothing may come back with no annotations at all: that is an
  ``upstream_error`` (not an empty list), worded by ``usage.server_tool_use.web_search_requests``
  when the answer carries it ("the search ran but the answer cited no usable source");
- a search that did not run comes back either as an answer with no search counted ("the model
  answered without running the search") or as an unanswered tool call (``finish_reason``
  ``tool_calls``): both are an ``upstream_error`` that says the search may not have run.
"""

from __future__ import annotations

from jobs.providers.base import Deadline, Found
from jobs.providers.openrouter import OpenRouter, billed_citations, common_body
from worker.config import SearchProvider
from worker.serialization import JsonObject, JsonValue

TOOL_TYPE = "openrouter:web_search"
SEARCH_ONCE = (
    "You relay one web search. Call the web search tool exactly once, with the user's message "
    "below as the query, word for word. Do not search again, do not rewrite the query, and do not "
    "answer from memory. After the search, reply with one short sentence that cites every result "
    "you were given."
)


class ServerToolSearch:
    name = SearchProvider.OPENROUTER_TOOL

    def __init__(self, client: OpenRouter) -> None:
        self.client = client

    def check_ready(self, org_id: str | None) -> None:
        self.client.key_for(org_id)

    async def search(self, query: str, max_results: int, org_id: str | None, deadline: Deadline) -> Found:
        settings = self.client.settings

        def build(reasoning_off: bool) -> JsonObject:
            return tool_body(
                settings.search_model, query, max_results, org_id, settings.search_engine, reasoning_off
            )

        completion = await self.client.complete(build, self.client.key_for(org_id), deadline)
        return billed_citations(completion, max_results, self.client.masker)


def tool_body(
    model: str, query: str, max_results: int, org_id: str | None, engine: str | None, reasoning_off: bool
) -> JsonObject:
    messages: list[JsonValue] = [
        {"role": "system", "content": SEARCH_ONCE},
        {"role": "user", "content": query},
    ]
    body = common_body(model, messages, org_id, reasoning_off)
    parameters: JsonObject = {"max_results": max_results, "max_total_results": max_results}
    if engine is not None:
        parameters["engine"] = engine
    body["tools"] = [{"type": TOOL_TYPE, "parameters": parameters}]
    return body
