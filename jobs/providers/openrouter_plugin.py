"""``openrouter-plugin``: OpenRouter's ``web`` plugin, the default provider.

The plugin always runs exactly one search for the message and attaches its results to the answer
as ``url_citation`` annotations; it is billed per result, so ``max_results`` bounds the cost.
OpenRouter now documents the plugin as deprecated in favour of the server tool
(``openrouter_tool``); it stays the default until the server tool is out of beta.
"""

from __future__ import annotations

from jobs.providers.base import Deadline, Found
from jobs.providers.openrouter import OpenRouter, billed_citations, common_body
from worker.config import SearchProvider
from worker.serialization import JsonObject


class PluginSearch:
    name = SearchProvider.OPENROUTER_PLUGIN

    def __init__(self, client: OpenRouter) -> None:
        self.client = client

    def check_ready(self, org_id: str | None) -> None:
        self.client.key_for(org_id)

    async def search(self, query: str, max_results: int, org_id: str | None, deadline: Deadline) -> Found:
        model = self.client.settings.search_model

        def build(reasoning_off: bool) -> JsonObject:
            return plugin_body(model, query, max_results, org_id, reasoning_off)

        completion = await self.client.complete(build, self.client.key_for(org_id), deadline)
        return billed_citations(completion, max_results, self.client.masker)


def plugin_body(
    model: str, query: str, max_results: int, org_id: str | None, reasoning_off: bool
) -> JsonObject:
    body = common_body(model, [{"role": "user", "content": query}], org_id, reasoning_off)
    body["plugins"] = [{"id": "web", "max_results": max_results}]
    return body
