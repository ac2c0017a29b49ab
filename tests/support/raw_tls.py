"""A TLS server that answers every connection with bytes the test wrote, exactly: for responses no
well-behaved server library would send (bad status lines, lying lengths, odd encodings)."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

Answer = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@dataclass(frozen=True)
class RawServer:
    port: int
    requests: list[bytes]

    def url(self, path: str = "/", host: str = "127.0.0.1") -> str:
        return f"https://{host}:{self.port}{path}"


def sends(raw: bytes, *, close: bool = True) -> Answer:
    """An answer that writes ``raw`` after reading the request head, then closes the connection."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(raw)
        await writer.drain()
        if close:
            writer.close()

    return answer


@contextlib.asynccontextmanager
async def serve_raw(answer: Answer, context: ssl.SSLContext) -> AsyncIterator[RawServer]:
    requests: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            requests.append(head)
            await answer(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ssl.SSLError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    try:
        yield RawServer(port, requests)
    finally:
        server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 2)
