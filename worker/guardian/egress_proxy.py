"""The rendering browser's only way out: an HTTP CONNECT proxy on loopback that judges every tunnel.

A page's scripts, images, frames, XHR, WebSocket and redirects each open a connection the page
chose, to any name or address; each is a way to reach the network the worker runs in (a cloud
metadata service, an admin port, a database). Chromium is started with this proxy as its only
route (``--proxy-server``, loopback *not* bypassed), so every connection it makes arrives here as
a ``CONNECT host:port`` and gets the judgement a fetch gets:

- the host is read by the guardian's URL rules (no userinfo, no percent, no ambiguous numbers);
- a name is resolved through the guarded resolver (every answer judged by the AddressPolicy, one
  refused answer refuses the name), an IP literal is judged as written;
- the tunnel connects to the address that was judged, and only that one: there is no second
  lookup, so a name that answers a public address and then 127.0.0.2 (rebinding) can win nothing;
- only the ports the render allows (443-style https ports) are opened, and only for TLS: the
  first bytes the browser sends through the tunnel must be a TLS handshake record, so a
  ``ws://`` or plain-http request smuggled through an allowed port is cut;
- anything but CONNECT (a plain ``GET http://...``, which is how a browser sends http through a
  proxy) is refused with 403, so no http: request ever leaves;
- every tunnel and every byte (both directions) counts against the render's bounds; past them the
  proxy refuses new tunnels and cuts the open ones;
- with an ``admits`` rule (the render's: hosts the page itself asked for, as its browser-side route
  table saw them), a tunnel nobody on the page asked for (the browser's own background traffic:
  sign-in, updates) is refused too.

One proxy serves one render, so its counts are that render's. What it refused is kept (as
reasons, never page-chosen text beyond the validated host) for the render's log and the tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from aiohttp.abc import AbstractResolver

from worker.errors import DnsFailure, GuardianRefusal
from worker.guardian.connector import GuardedResolver
from worker.guardian.policy import AddressPolicy
from worker.guardian.urls import Target, check_url
from worker.guardian.verdict import IPAddress

log = logging.getLogger("research.render.egress")

MAX_HEAD_BYTES = 8192  # a CONNECT request head is one line and a few headers
HEAD_TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 10.0
RELAY_CHUNK = 65_536
# A TLS record starts with its content type: 22 is a handshake (the ClientHello).
TLS_HANDSHAKE = 0x16
HTTPS_PORTS = frozenset({443})


@dataclass(frozen=True)
class EgressBounds:
    max_requests: int  # tunnels opened (refused ones are not counted: they cost nothing upstream)
    max_bytes: int  # bytes relayed, both directions together
    ports: frozenset[int] = HTTPS_PORTS


@dataclass
class EgressLog:
    """What one render's proxy did: counts, and each refusal's reason (for logs and tests)."""

    tunnels: int = 0
    bytes: int = 0
    refused: list[str] = field(default_factory=list)  # "host:port reason"
    connected: list[str] = field(default_factory=list)  # "address:port" actually connected to
    over_bounds: bool = False

    def refuse(self, what: str, reason: str) -> None:
        self.refused.append(f"{what} {reason}")


class EgressProxy:
    """One render's proxy: ``await start()`` gives the port, ``close()`` cuts every tunnel."""

    def __init__(
        self,
        policy: AddressPolicy,
        bounds: EgressBounds,
        resolver: AbstractResolver | None = None,
        host: str = "127.0.0.1",
        admits: Callable[[str, int], bool] | None = None,
    ) -> None:
        self._admits = admits
        self._policy = policy
        self._bounds = bounds
        self._resolver = GuardedResolver(policy, resolver)
        self._host = host
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self.log = EgressLog()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the egress proxy is not started")
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def address(self) -> str:
        return f"http://{self._host}:{self.port}"

    def arm(self, bounds: EgressBounds) -> None:
        """A proxy started ahead of its render (a warm browser's) takes the render's bounds when the
        render takes the browser; until then its bounds admit nothing. Its log starts afresh."""
        self._bounds = bounds
        self.log = EgressLog()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._accept, self._host, 0)
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
        # The resolver is the caller's (a fake in tests, the system's otherwise): not closed here.

    async def __aenter__(self) -> EgressProxy:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.get_running_loop().create_task(self._serve(reader, writer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        upstream: asyncio.StreamWriter | None = None
        try:
            head = await self._read_head(reader)
            if head is None:
                return
            target = await self._judge(head, writer)
            if target is None:
                return
            up_reader, upstream = target
            self._writers.add(upstream)
            writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            await writer.drain()
            first = await asyncio.wait_for(reader.read(RELAY_CHUNK), HEAD_TIMEOUT_S)
            if not first or first[0] != TLS_HANDSHAKE:
                self.log.refuse(self._shown(upstream), "not_tls")
                return
            if not self._count(len(first)):
                return
            upstream.write(first)
            await asyncio.gather(self._relay(reader, upstream), self._relay(up_reader, writer))
        except (OSError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            for w in (writer, upstream):
                if w is not None:
                    self._writers.discard(w)
                    w.transport.abort()

    async def _read_head(self, reader: asyncio.StreamReader) -> list[str] | None:
        try:
            raw = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            return None
        if len(raw) > MAX_HEAD_BYTES:
            return None
        return raw.decode("latin-1").split("\r\n")

    async def _judge(
        self, head: list[str], writer: asyncio.StreamWriter
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """The upstream connection for an allowed CONNECT; None after answering a refusal."""
        parts = head[0].split(" ")
        if len(parts) != 3 or parts[0] != "CONNECT":
            # A browser sends an http: URL to a proxy as "GET http://...": never forwarded.
            self.log.refuse("request", "not_connect")
            await _answer(writer, 403, "only CONNECT tunnels for https are allowed")
            return None
        authority = parts[1]
        try:
            target = check_url(f"https://{authority}/", self._policy)
        except GuardianRefusal as refusal:
            self.log.refuse("authority", refusal.reason.value)
            await _answer(writer, 403, "refused by the guardian")
            return None
        shown = f"{target.host}:{target.port}"
        if target.port not in self._bounds.ports:
            self.log.refuse(shown, "port")
            await _answer(writer, 403, "refused by the guardian")
            return None
        if self._admits is not None and not self._admits(target.host, target.port):
            self.log.refuse(shown, "not_from_page")
            await _answer(writer, 403, "refused by the guardian")
            return None
        if self.log.tunnels >= self._bounds.max_requests or self.log.over_bounds:
            self.log.over_bounds = True
            self.log.refuse(shown, "request_bound")
            await _answer(writer, 429, "the render used its requests")
            return None
        try:
            address = await self._address(target)
        except (GuardianRefusal, DnsFailure) as refusal:
            reason = refusal.reason.value if isinstance(refusal, GuardianRefusal) else "dns_failure"
            self.log.refuse(shown, reason)
            await _answer(writer, 403, "refused by the guardian")
            return None
        # The last line of defense, as the fetch's socket factory: judge what is connected to.
        verdict = self._policy.classify(address)
        if not verdict.allowed:
            self.log.refuse(shown, verdict.reason.value)
            await _answer(writer, 403, "refused by the guardian")
            return None
        self.log.tunnels += 1
        try:
            opened = await asyncio.wait_for(
                asyncio.open_connection(str(address), target.port), CONNECT_TIMEOUT_S
            )
        except (OSError, TimeoutError):
            self.log.refuse(shown, "connection_failed")
            await _answer(writer, 502, "the connection failed")
            return None
        self.log.connected.append(f"{address}:{target.port}")
        return opened

    async def _address(self, target: Target) -> IPAddress:
        """The one address the tunnel may connect to: the literal, or the first judged answer."""
        if target.address is not None:
            return target.address
        answers = await self._resolver.resolve(target.host, target.port)
        return ipaddress.ip_address(answers[0]["host"].split("%", 1)[0])

    async def _relay(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while chunk := await source.read(RELAY_CHUNK):
                if not self._count(len(chunk)):
                    break
                sink.write(chunk)
                await sink.drain()
        finally:
            if self.log.over_bounds:
                sink.transport.abort()
            else:
                _close_quietly(sink)

    def _count(self, size: int) -> bool:
        """Charge ``size`` relayed bytes; False (and every tunnel cut) past the byte bound."""
        self.log.bytes += size
        if self.log.bytes > self._bounds.max_bytes:
            if not self.log.over_bounds:
                self.log.over_bounds = True
                self.log.refuse("render", "byte_bound")
                for writer in list(self._writers):
                    writer.transport.abort()
            return False
        return True

    @staticmethod
    def _shown(writer: asyncio.StreamWriter) -> str:
        peer = writer.get_extra_info("peername")
        return f"{peer[0]}:{peer[1]}" if isinstance(peer, Sequence) and len(peer) >= 2 else "upstream"


def _close_quietly(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(Exception):
        if writer.can_write_eof():
            writer.write_eof()


async def _answer(writer: asyncio.StreamWriter, status: int, words: str) -> None:
    body = words.encode()
    writer.write(
        f"HTTP/1.1 {status} {words}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )
    with contextlib.suppress(OSError):
        await writer.drain()
