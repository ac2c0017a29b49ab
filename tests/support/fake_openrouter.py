"""A fake OpenRouter on 127.0.0.1: the chat completions contract a web search relies on, and its failures.

It checks every request against the documented shape (POST to ``/api/v1/chat/completions``, a
Bearer key, a JSON body with a model, one user message, the web plugin, never a stream), records
it, and answers from a script of replies the test queues; with the script empty it answers a
plain search with three citations. A request of the wrong shape is answered 400 and listed in
``violations``, so a test can assert there were none.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

# Shaped like a real key, so the worker's masking by shape is exercised as well as by value.
KEY = "sk-or-v1-" + "5eC7e7" * 10
PATH = "/api/v1/chat/completions"
REASONING_MANDATORY = "Reasoning is mandatory for this endpoint and cannot be disabled."
PROSE = "Here is what I found, in my own words, which the worker must throw away."


@dataclass
class Received:
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def key(self) -> str:
        return self.headers.get("Authorization", "").removeprefix("Bearer ")


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"
    delay_s: float = 0.0
    hang_up: bool = False  # close the connection without answering


def url_citation(url: str, title: str = "A page", content: str = "What the page says.") -> dict[str, Any]:
    return {
        "type": "url_citation",
        "url_citation": {"url": url, "title": title, "content": content, "start_index": 0, "end_index": 10},
    }


def file_citations() -> list[dict[str, Any]]:
    """Both shapes a file annotation takes: OpenRouter's ``file`` and OpenAI's ``file_citation``."""
    return [
        {"type": "file", "file": {"hash": "abc123", "name": "notes.pdf", "content": [{"type": "text"}]}},
        {"type": "file_citation", "file_citation": {"file_id": "file-1", "url": "https://example.org/f"}},
    ]


def completion(
    annotations: list[Any],
    *,
    cost: float = 0.0021,
    prompt_tokens: int = 1200,
    completion_tokens: int = 180,
    finish_reason: str = "stop",
) -> Reply:
    body = {
        "id": "gen-fake",
        "provider": "Fake",
        "model": "openai/gpt-4.1-nano",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "finish_reason": finish_reason,
                "native_finish_reason": finish_reason,
                "message": {"role": "assistant", "content": PROSE, "annotations": annotations},
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "cost": cost,
        },
    }
    return Reply(body=orjson.dumps(body))


def default_citations() -> list[dict[str, Any]]:
    return [url_citation(f"https://example.org/result-{n}", f"Result {n}") for n in range(1, 4)]


def provider_error(status: int, message: str, *, retry_after: str | None = None) -> Reply:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    body = orjson.dumps({"error": {"code": status, "message": message}})
    return Reply(status=status, body=body, headers=headers)


def malformed() -> Reply:
    return Reply(body=b'{"id": "gen-fake", "choices": [{"message": ')


def streamed() -> Reply:
    chunk = orjson.dumps({"choices": [{"delta": {"content": "Here"}}]})
    return Reply(body=b"data: " + chunk + b"\n\ndata: [DONE]\n\n", content_type="text/event-stream")


def slow(seconds: float) -> Reply:
    reply = completion(default_citations())
    reply.delay_s = seconds
    return reply


class FakeOpenRouter:
    def __init__(self, *, keys: set[str] | None = None) -> None:
        self.keys = keys  # when set, any other key is answered 401
        self.reasoning_mandatory = False
        self.requests: list[Received] = []
        self.violations: list[str] = []
        self.script: deque[Reply] = deque()
        self._runner: web.AppRunner | None = None
        self.base_url = ""

    def will(self, *replies: Reply) -> None:
        self.script.extend(replies)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post(PATH, self._handle)
        # Cancel a slow handler when the worker gives up on it, so the server stops at once.
        self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.base_url = f"http://{host}:{port}/api/v1"

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            body = None
        received = Received(dict(request.headers), body if isinstance(body, dict) else {})
        self.requests.append(received)
        problem = shape_problem(request, body)
        if problem is not None:
            self.violations.append(problem)
            return answer(provider_error(400, f"fake: {problem}"))
        if self.keys is not None and received.key not in self.keys:
            return answer(provider_error(401, "No auth credentials found"))
        if self.reasoning_mandatory and "reasoning" in received.body:
            return answer(provider_error(400, REASONING_MANDATORY))
        reply = self.script.popleft() if self.script else completion(default_citations())
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        if reply.hang_up:
            assert request.transport is not None
            request.transport.close()
            raise asyncio.CancelledError
        return answer(reply)


def answer(reply: Reply) -> web.Response:
    return web.Response(
        status=reply.status, body=reply.body, headers={"Content-Type": reply.content_type, **reply.headers}
    )


def shape_problem(request: web.Request, body: object) -> str | None:
    """What is wrong with the request by the documented contract, or None."""
    authorization = request.headers.get("Authorization", "")
    if not authorization.startswith("Bearer ") or not authorization.removeprefix("Bearer ").strip():
        return "no Bearer key"
    if not request.headers.get("Content-Type", "").startswith("application/json"):
        return "the body is not declared JSON"
    if not isinstance(body, dict):
        return "the body is not a JSON object"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "no model"
    messages = body.get("messages")
    if not isinstance(messages, list) or len(messages) != 1:
        return "not exactly one message"
    if not isinstance(messages[0], dict) or messages[0].get("role") != "user":
        return "the message is not the user's"
    if not isinstance(messages[0].get("content"), str) or not messages[0]["content"]:
        return "the message has no text"
    plugins = body.get("plugins")
    web_plugins = (
        [p for p in plugins if isinstance(p, dict) and p.get("id") == "web"]
        if isinstance(plugins, list)
        else []
    )
    if len(web_plugins) != 1:
        return "no web plugin"
    max_results = web_plugins[0].get("max_results")
    if isinstance(max_results, bool) or not isinstance(max_results, int) or not 1 <= max_results <= 25:
        return "the web plugin's max_results is not 1..25"
    if body.get("stream", False) is not False:
        return "a stream was asked for"
    if "reasoning" in body and not isinstance(body["reasoning"], dict):
        return "reasoning is not an object"
    if "user" in body and not isinstance(body["user"], str):
        return "user is not a string"
    return None


@contextlib.asynccontextmanager
async def fake_openrouter(**kwargs: Any) -> AsyncIterator[FakeOpenRouter]:
    fake = FakeOpenRouter(**kwargs)
    await fake.start()
    try:
        yield fake
    finally:
        await fake.close()
