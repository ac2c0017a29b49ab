"""A result in the shape a model vendor's API takes back as a tool result.

``anthropic``: the content blocks of a Messages API ``tool_result``. A search becomes one
``search_result`` block per cited source (its url as ``source``, its title, its snippet as the
text, citations enabled), so Claude cites the sources natively; the search's own envelope (the
query, the provider) is not a source and is left out. A fetch, an empty search and every error
become one ``text`` block holding the result's JSON, exactly what ``shape="json"`` returns.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from worker.serialization import JsonObject, dumps


class Shape(StrEnum):
    JSON = "json"  # the result's JSON text
    ANTHROPIC = "anthropic"  # Messages API tool_result content blocks


def anthropic_blocks(result: JsonObject) -> list[dict[str, Any]]:
    citations = result.get("results")
    if result.get("ok") and result.get("tool") == "web_search" and isinstance(citations, list) and citations:
        return [search_result_block(citation) for citation in citations if isinstance(citation, dict)]
    return [{"type": "text", "text": dumps(result).decode()}]


def search_result_block(citation: JsonObject) -> dict[str, Any]:
    url = str(citation.get("url") or "")
    title = str(citation.get("title") or "") or url
    # The API refuses an empty text block; a source with no snippet still has its title.
    text = str(citation.get("snippet") or "") or title
    return {
        "type": "search_result",
        "source": url,
        "title": title,
        "content": [{"type": "text", "text": text}],
        "citations": {"enabled": True},
    }
