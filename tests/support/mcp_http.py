"""The MCP HTTP app served by uvicorn on 127.0.0.1 in the test's event loop, and the SDK's client for it."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from jobs.definitions import ToolFormat, formatted
from worker.client import ResearchClient
from worker.config import Settings
from worker.mcp.http import build_app
from worker.mcp.tokens import Tokens, digest_of, load_tokens

TOKEN = "mcp-test-token-" + "7a" * 16
OTHER_TOKEN = "mcp-test-token-" + "3c" * 16


def write_tokens(path: Path, tokens: dict[str, str]) -> Path:
    """A tokens file holding the digest of each token: ``{token: org_id}`` in, hashes on disk."""
    path.write_text(json.dumps({digest_of(token): org for token, org in tokens.items()}), encoding="utf-8")
    path.chmod(0o600)
    return path


@dataclass
class McpHttp:
    url: str  # http://127.0.0.1:PORT/mcp

    def client(
        self, token: str | None = TOKEN, *, options: dict[str, Any] | None = None, **headers: str
    ) -> Client:
        """The SDK's own client over streamable HTTP, sending ``token`` and any other headers;
        ``options`` are the client's own (an ``elicitation_callback``, say)."""
        sent = dict(headers)
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        http = httpx2.AsyncClient(headers=sent, timeout=httpx2.Timeout(30.0, read=60.0))
        return Client(streamable_http_client(self.url, http_client=http), **(options or {}))

    def raw(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(timeout=10.0)


@contextlib.asynccontextmanager
async def serving(
    settings: Settings,
    client: ResearchClient,
    tokens: Tokens,
    *,
    progress_every_s: float = 2.0,
    report_prefix: str = "mcp-",
    built_for: str = "127.0.0.1",
) -> AsyncIterator[McpHttp]:
    """``built_for``: the host the app is built as if bound to (another than loopback turns the
    SDK's own Host and Origin check off); it is served on 127.0.0.1 whatever it names."""
    app = build_app(
        settings,
        formatted(settings, ToolFormat.MCP)["tools"],
        client,
        tokens,
        host=built_for,
        version="test",
        progress_every_s=progress_every_s,
        report_prefix=report_prefix,
    )
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None, access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(60):  # generous: a loaded machine starts uvicorn slowly
            while not server.started:
                if task.done():
                    task.result()
                await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield McpHttp(f"http://127.0.0.1:{port}/mcp")
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 15)


def tokens_for(path: Path, tokens: dict[str, str]) -> Tokens:
    return load_tokens(str(write_tokens(path, tokens)))
