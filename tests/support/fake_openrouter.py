"""A fake OpenRouter on 127.0.0.1: the chat completions contract a web search relies on, and its failures.

It checks every request against the documented shape (POST to ``/api/v1/chat/completions``, a
Bearer key, a JSON body with a model, never a stream) and one of the two ways to search: the web
plugin (one user message, ``plugins: [{"id": "web", ...}]``) or the ``openrouter:web_search``
server tool (a system message then the user's, ``tools: [{"type": "openrouter:web_search",
"parameters": {...}}]``, no plugin). It records each request and answers from a script of replies
the test queues; with the script empty it answers a plain search with three citations. A request
of the wrong shape is answered 400 and listed in ``violations``, so a test can assert there were
none.
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
SERVER_TOOL = "openrouter:web_search"
ELSEWHERE = "/elsewhere"
ENGINES = {"auto", "native", "exa", "firecrawl", "parallel"}


@dataclass
class Received:
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def key(self) -> str:
        return self.headers.get("Authorization", "").removeprefix("Bearer ")

    @property
    def searched_with(self) -> str:
        """ "tool" when the request named the server tool, else "plugin"."""
        return "tool" if "tools" in self.body else "plugin"

    @property
    def query(self) -> str:
        messages = self.body.get("messages") or [{}]
        return str(messages[-1].get("content", ""))


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


def tool_completion(annotations: list[Any], *, searches: int | None = 1, **kwargs: Any) -> Reply:
    """A server-tool answer: the same completion, its usage counting the searches the tool ran."""
    reply = completion(annotations, **kwargs)
    if searches is not None:
        body = orjson.loads(reply.body)
        body["usage"]["server_tool_use"] = {"web_search_requests": searches}
        reply.body = orjson.dumps(body)
    return reply


def unanswered_tool_call() -> Reply:
    """A model that asked for the search and got back to us before OpenRouter ran it."""
    reply = completion([], finish_reason="tool_calls")
    body = orjson.loads(reply.body)
    body["choices"][0]["message"]["content"] = None
    body["choices"][0]["message"]["tool_calls"] = [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": SERVER_TOOL, "arguments": orjson.dumps({"query": "q"}).decode()},
        }
    ]
    reply.body = orjson.dumps(body)
    return reply


def default_citations() -> list[dict[str, Any]]:
    return [url_citation(f"https://example.org/result-{n}", f"Result {n}") for n in range(1, 4)]


def provider_error(status: int, message: str, *, retry_after: str | None = None) -> Reply:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    body = orjson.dumps({"error": {"code": status, "message": message}})
    return Reply(status=status, body=body, headers=headers)


def redirect(status: int, location: str) -> Reply:
    return Reply(status=status, headers={"Location": location})


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
        self.elsewhere: list[Received] = []  # anything sent to ELSEWHERE, where redirects point
        self.violations: list[str] = []
        self.script: deque[Reply] = deque()
        self._runner: web.AppRunner | None = None
        self.base_url = ""

    def will(self, *replies: Reply) -> None:
        self.script.extend(replies)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post(PATH, self._handle)
        app.router.add_route("*", ELSEWHERE, self._elsewhere)
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

    @property
    def elsewhere_url(self) -> str:
        return self.base_url.removesuffix("/api/v1") + ELSEWHERE

    async def _elsewhere(self, request: web.Request) -> web.StreamResponse:
        self.elsewhere.append(
            Received(dict(request.headers), {"raw": (await request.read()).decode("latin-1")})
        )
        return answer(completion(default_citations()))

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
    problem = tool_problem(body) if "tools" in body else plugin_problem(body)
    if problem is not None:
        return problem
    if body.get("stream", False) is not False:
        return "a stream was asked for"
    if "reasoning" in body and not isinstance(body["reasoning"], dict):
        return "reasoning is not an object"
    if "user" in body and not isinstance(body["user"], str):
        return "user is not a string"
    return None


def plugin_problem(body: dict[str, Any]) -> str | None:
    messages = body.get("messages")
    if not isinstance(messages, list) or len(messages) != 1:
        return "not exactly one message"
    problem = user_message_problem(messages[0])
    if problem is not None:
        return problem
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
    return None


def tool_problem(body: dict[str, Any]) -> str | None:
    """The server tool's shape: a system message then the user's, one web search tool, no plugin."""
    if "plugins" in body:
        return "both the web plugin and a server tool"
    messages = body.get("messages")
    if not isinstance(messages, list) or len(messages) != 2:
        return "not a system message and a user message"
    system = messages[0]
    if not isinstance(system, dict) or system.get("role") != "system" or not system.get("content"):
        return "the first message is not a system message with text"
    problem = user_message_problem(messages[1])
    if problem is not None:
        return problem
    tools = body.get("tools")
    if not isinstance(tools, list) or len(tools) != 1 or not isinstance(tools[0], dict):
        return "not exactly one tool"
    tool = tools[0]
    if tool.get("type") != SERVER_TOOL:
        return f"the tool is not {SERVER_TOOL}"
    parameters = tool.get("parameters", {})
    if not isinstance(parameters, dict):
        return "the tool's parameters are not an object"
    for name in ("max_results", "max_total_results"):
        value = parameters.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            return f"the tool's {name} is not a positive integer"
    if "engine" in parameters and parameters["engine"] not in ENGINES:
        return "the tool's engine is not one OpenRouter documents"
    return None


def user_message_problem(message: object) -> str | None:
    if not isinstance(message, dict) or message.get("role") != "user":
        return "the message is not the user's"
    if not isinstance(message.get("content"), str) or not message["content"]:
        return "the message has no text"
    return None


@contextlib.asynccontextmanager
async def fake_openrouter(**kwargs: Any) -> AsyncIterator[FakeOpenRouter]:
    fake = FakeOpenRouter(**kwargs)
    await fake.start()
    try:
        yield fake
    finally:
        await fake.close()
