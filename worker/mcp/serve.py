"""Run the MCP server: over stdio for one host process, or over streamable HTTP with uvicorn."""

from __future__ import annotations

import logging
import os
import socket
import sys
from io import TextIOWrapper
from typing import Any, cast

import anyio
import uvicorn
from mcp.server.stdio import stdio_server

from worker.client import ResearchClient
from worker.config import Settings
from worker.logs import fields
from worker.mcp.consent import UserUrlPolicy
from worker.mcp.http import build_app
from worker.mcp.jsonrpc import CheckedLines
from worker.mcp.tokens import LiveTokens, Tokens
from worker.mcp.tools import Billing, build_server

log = logging.getLogger("research.mcp")

# The SDK logs every session id at INFO; a session id lets its holder speak in that session.
logging.getLogger("mcp").setLevel(logging.WARNING)


class ForeignSessionFilter(logging.Filter):
    """The SDK logs, at WARNING, the id of a session another token presented: a secret in the
    log, and no fault of the server's. The line is dropped and told again at INFO without it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and record.msg.startswith("Rejecting request for session"):
            log.info("a request presented the session id of another token's session; answered 404")
            return False
        return True


logging.getLogger("mcp.server.streamable_http_manager").addFilter(ForeignSessionFilter())

WAIT_MARGIN_S = 30.0  # a call waits the job timeout plus this before it answers `timeout`


def client_for(settings: Settings) -> ResearchClient:
    return ResearchClient(settings=settings, wait_s=settings.job_timeout_s + WAIT_MARGIN_S)


async def serve_stdio(
    settings: Settings, listing: list[dict[str, Any]], report_id: str, version: str
) -> None:
    """One session for as long as the host keeps stdin open; every call counts against ``report_id``."""
    billing = Billing(report_id=report_id)
    async with client_for(settings) as client:
        server = build_server(
            listing, client, lambda ctx: billing, version=version, user_urls=UserUrlPolicy.of(settings)
        )
        lines = CheckedLines(
            anyio.wrap_file(TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace"))
        )
        async with stdio_server(stdin=cast("anyio.AsyncFile[str]", lines)) as (read_stream, write_stream):
            lines.answer_with(write_stream)
            await server.run(read_stream, write_stream, server.create_initialization_options())


class CannotListen(Exception):
    """The address is taken or not ours; the message says which, in the system's words."""


def listening_socket(host: str, port: int) -> socket.socket:
    """Bound before uvicorn starts, so a taken port is one line and an exit code of our own."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host.strip("[]"), port), family=family)
    except OSError as exc:
        reason = os.strerror(exc.errno).lower() if exc.errno else type(exc).__name__
        raise CannotListen(f"the MCP server cannot listen on {host}:{port}: {reason}") from None


async def serve_http(
    settings: Settings, listing: list[dict[str, Any]], tokens: Tokens, host: str, port: int, version: str
) -> None:
    sock = listening_socket(host, port)
    async with client_for(settings) as client:
        # The file is read again when it changes: a removed token is refused without a restart.
        live = LiveTokens(settings.mcp_tokens_file, tokens) if settings.mcp_tokens_file else tokens
        app = build_app(settings, listing, client, live, host=host, version=version)
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_config=None,  # our logging, configured once by the command line
            access_log=False,
            server_header=False,
            proxy_headers=False,
            lifespan="on",
        )
        bound = sock.getsockname()[1]  # the port the system chose, for --port 0
        shown = f"[{host.strip('[]')}]" if ":" in host else host
        log.info("serving MCP over streamable HTTP", extra=fields(url=f"http://{shown}:{bound}/mcp"))
        await uvicorn.Server(config).serve(sockets=[sock])
