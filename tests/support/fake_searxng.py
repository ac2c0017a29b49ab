"""A fake SearXNG on 127.0.0.1: its JSON search API as documented, and the ways an instance fails.

``GET /search?q=...&format=json`` answers ``{"query", "number_of_results", "results": [{"url",
"title", "content", "engine", ...}], "answers", "suggestions", "unresponsive_engines", ...}``. Like
a real instance it answers 403 when asked for a format it does not serve (``json_enabled=False``).
Each request is recorded; a request of the wrong shape (not a GET, no ``q``, or another format) is
listed in ``violations``. Replies come from a script the test queues (``Reply`` from the fake
OpenRouter: status, body, headers, delay, hang-up); with the script empty it answers three results.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from tests.support.fake_openrouter import Reply, answer

ELSEWHERE = "/elsewhere"


@dataclass
class Asked:
    method: str
    path: str
    params: dict[str, str]
    headers: dict[str, str]


def result(
    url: str, title: str = "A page", content: str = "What the page says.", engine: str = "duckduckgo"
) -> dict[str, Any]:
    return {
        "url": url,
        "title": title,
        "content": content,
        "engine": engine,
        "engines": [engine],
        "positions": [1],
        "score": 1.0,
        "category": "general",
        "parsed_url": ["https", "example.org", "/", "", "", ""],
        "template": "default.html",
    }


def results_answer(
    results: list[Any], *, query: str = "q", unresponsive: list[list[str]] | None = None
) -> Reply:
    body = {
        "query": query,
        "number_of_results": len(results),
        "results": results,
        "answers": [],
        "corrections": [],
        "infoboxes": [],
        "suggestions": ["a suggestion the worker ignores"],
        "unresponsive_engines": unresponsive or [],
    }
    return Reply(body=orjson.dumps(body))


def default_results() -> list[dict[str, Any]]:
    return [result(f"https://example.org/result-{n}", f"Result {n}") for n in range(1, 4)]


def huge_answer(size: int) -> Reply:
    """A syntactically valid answer of about ``size`` bytes: results whose snippets are very long."""
    filler = "x" * 10_000
    count = max(1, size // (len(filler) + 200))
    return results_answer([result(f"https://example.org/{n}", content=filler) for n in range(count)])


def hang(seconds: float = 30.0) -> Reply:
    return Reply(body=results_answer(default_results()).body, delay_s=seconds)


def error_page(status: int, text: str = "Too Many Requests", retry_after: str | None = None) -> Reply:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return Reply(
        status=status,
        body=f"<html><body>{text}</body></html>".encode(),
        headers=headers,
        content_type="text/html",
    )


class FakeSearxng:
    def __init__(self, *, json_enabled: bool = True) -> None:
        self.json_enabled = json_enabled
        self.requests: list[Asked] = []
        self.elsewhere: list[Asked] = []
        self.violations: list[str] = []
        self.script: deque[Reply] = deque()
        self._runner: web.AppRunner | None = None
        self.origin = ""
        self.base_url = ""

    def will(self, *replies: Reply) -> None:
        self.script.extend(replies)

    @property
    def elsewhere_url(self) -> str:
        return self.origin + ELSEWHERE

    async def start(self, path: str = "") -> None:
        app = web.Application()
        app.router.add_route("*", f"{path}/search", self._search)
        app.router.add_route("*", ELSEWHERE, self._elsewhere)
        self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.origin = f"http://{host}:{port}"
        self.base_url = f"{self.origin}{path}"

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _elsewhere(self, request: web.Request) -> web.StreamResponse:
        self.elsewhere.append(Asked(request.method, request.path, dict(request.query), dict(request.headers)))
        return answer(results_answer(default_results()))

    async def _search(self, request: web.Request) -> web.StreamResponse:
        asked = Asked(request.method, request.path, dict(request.query), dict(request.headers))
        self.requests.append(asked)
        problem = shape_problem(asked)
        if problem is not None:
            self.violations.append(problem)
            return answer(error_page(400, "Bad Request"))
        if not self.json_enabled:
            return answer(error_page(403, "Forbidden"))
        reply = (
            self.script.popleft()
            if self.script
            else results_answer(default_results(), query=asked.params["q"])
        )
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        if reply.hang_up:
            assert request.transport is not None
            request.transport.close()
            raise asyncio.CancelledError
        return answer(reply)


def shape_problem(asked: Asked) -> str | None:
    if asked.method != "GET":
        return f"a {asked.method}, not a GET"
    if not asked.params.get("q", "").strip():
        return "no q"
    if asked.params.get("format") != "json":
        return "the format is not json"
    return None


@contextlib.asynccontextmanager
async def fake_searxng(*, path: str = "", **kwargs: Any) -> AsyncIterator[FakeSearxng]:
    fake = FakeSearxng(**kwargs)
    await fake.start(path)
    try:
        yield fake
    finally:
        await fake.close()
