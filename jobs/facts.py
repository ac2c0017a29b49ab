"""Each tool's light facts: its name, what a call is about, its definitions and its output schema.

The faces (the client, the MCP server, the command line) learn these here, and nothing here imports
a tool's body (``jobs.fetch``, ``jobs.search``, the reader, the providers): a client that only
enqueues jobs, or ``research-worker tools``, never pays for importing what runs them. The tools
answer ``about`` with these same functions, so a refused call names what a job would have named.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from jobs.definitions import ToolFormat, formatted, tool_definitions
from jobs.output_schemas import output_schema
from worker.errors import DestinationBlocked, SchemeNotAllowed
from worker.guardian.urls import Target, parse_https_url
from worker.limits import CITE, FETCH_PAGE, MAX_QUERY_CHARS, MAX_URL_LENGTH, WEB_SEARCH
from worker.state.result_records import About

__all__ = [
    "FETCH_PAGE",
    "WEB_SEARCH",
    "ToolFormat",
    "about_of",
    "formatted",
    "output_schema",
    "parsed_url",
    "query_about",
    "tool_definitions",
    "url_about",
]


def url_about(arguments: Mapping[str, Any]) -> About | None:
    """What a fetch (or a render) is about: the canonical form of its URL, or the URL as given."""
    url = arguments.get("url")
    if not isinstance(url, str):
        return None
    url = url.strip()[:MAX_URL_LENGTH]
    try:
        return {"url": parsed_url(url).url}
    except (DestinationBlocked, SchemeNotAllowed):
        return {"url": url}  # refused by the fetch too, which says why


@functools.lru_cache(maxsize=256)
def parsed_url(url: str) -> Target:
    """The guardian's parse of a URL a job names, made once in a worker: the job's ``about``
    (before it runs) and its run read the same Target. A Target is frozen; a refusal is raised
    anew each time, never kept."""
    return parse_https_url(url)


def query_about(arguments: Mapping[str, Any]) -> About | None:
    """What a search is about: its query, trimmed as the tool trims it."""
    query = arguments.get("query")
    return {"query": query.strip()[:MAX_QUERY_CHARS]} if isinstance(query, str) else None


ABOUT: Mapping[str, Callable[[Mapping[str, Any]], About | None]] = {
    FETCH_PAGE: url_about,
    WEB_SEARCH: query_about,
    CITE: url_about,
}


def about_of(function: str, arguments: Mapping[str, Any]) -> About | None:
    """What a job of ``function`` is about, as its own tool says in its results (for results the
    client writes itself: a refused or timed-out call still names its URL or query)."""
    about = ABOUT.get(function)
    return about(arguments) if about is not None else None
