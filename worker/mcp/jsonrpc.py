"""stdio's lines checked before the SDK reads them: every malformed request gets its JSON-RPC error.

The SDK drops a line it cannot read as a JSON-RPC message without a word: a request whose
``method`` is a number or null, or whose ``params`` is a string or a list, waits for an answer
that never comes, and a host hangs on it. JSON-RPC 2.0 says each gets an error: a line that is
not JSON a parse error, anything that is not a request object (a batch, a number) an invalid
request with a null id, a request with a bad ``method`` or ``params`` an invalid request under
its own id when it has a usable one. A notification (no ``id``) is never answered, as the
specification says. Every other line reaches the SDK unchanged.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any, Protocol

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

PARSE_ERROR = -32700
INVALID_REQUEST = -32600


def malformed(line: str) -> types.JSONRPCError | None:
    """The error a line gets in place of the SDK, or None when the SDK should read it."""
    if not line.strip():
        return None
    try:
        # The standard library's parser, as lenient as the SDK's on integers past 64 bits (the
        # tool call then refuses them as arguments); nesting too deep for it is the SDK's too.
        message: Any = json.loads(line)
    except RecursionError:
        return None
    except ValueError:
        return _error(None, PARSE_ERROR, "parse error: the line is not JSON")
    if not isinstance(message, dict):
        return _error(None, INVALID_REQUEST, "invalid request: a message must be one JSON object")
    if "method" not in message:
        return None  # a response to one of the server's own requests: the SDK's to match
    ident = message.get("id")
    usable = (
        ident if isinstance(ident, str) or (isinstance(ident, int) and not isinstance(ident, bool)) else None
    )
    problem: str | None = None
    if not isinstance(message["method"], str):
        problem = "invalid request: method must be a string"
    elif "params" in message and message["params"] is not None and not isinstance(message["params"], dict):
        problem = "invalid request: params must be an object"
    elif "id" in message and usable is None:
        problem = "invalid request: id must be a string or an integer"
    if problem is None:
        return None
    if "id" not in message:
        return _NOTIFICATION  # dropped unanswered
    return _error(usable, INVALID_REQUEST, problem)


def _error(ident: str | int | None, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=ident, error=types.ErrorData(code=code, message=message))


# A malformed notification: kept from the SDK, and answered with nothing.
_NOTIFICATION = _error(None, INVALID_REQUEST, "a malformed notification")


class Sender(Protocol):
    async def send(self, item: SessionMessage, /) -> None: ...


class CheckedLines:
    """The host's lines as the SDK's stdio transport reads them (``async for line in stdin``),
    with the malformed ones answered here through ``answer`` once it is set."""

    def __init__(self, lines: AsyncIterable[str]) -> None:
        self._lines = lines
        self._answer: Sender | None = None
        self._ready = anyio.Event()

    def answer_with(self, stream: Sender) -> None:
        self._answer = stream
        self._ready.set()

    async def __aiter__(self) -> AsyncIterator[str]:
        async for line in self._lines:
            error = malformed(line)
            if error is None:
                yield line
            elif error is not _NOTIFICATION:
                await self._ready.wait()
                assert self._answer is not None
                try:
                    await self._answer.send(SessionMessage(error))
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return
