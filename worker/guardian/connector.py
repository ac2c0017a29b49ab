"""The connection: resolve once, judge every answer, connect only to what was judged.

aiohttp connects to the addresses its resolver returns, so a resolver that checks every answer
and returns only checked addresses pins each connection to what was validated: there is no second
lookup, hence no DNS-rebinding window, while TLS still verifies the original host name. IP-literal
hosts skip the resolver entirely, so the socket factory judges the address actually connected, as
the last line of defense for every connection.
"""

from __future__ import annotations

import asyncio
import contextvars
import ipaddress
import socket
import ssl
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import ThreadedResolver

from worker.errors import DnsFailure
from worker.guardian.policy import AddressPolicy
from worker.guardian.reasons import Reason
from worker.net.browser_http import BrowserTCPConnector
from worker.tracing import network as traced
from worker.tracing.phases import DNS_AND_GUARDIAN, phase

if TYPE_CHECKING:
    from aiohappyeyeballs import AddrInfoType

    from worker.config import Settings

DNS_TIMEOUT_S = 5.0


class SocketRefused(OSError):
    """Raised by the socket factory; an OSError so aiohttp reports it as a connection failure."""

    def __init__(self, address: str, reason: Reason, detail: str) -> None:
        super().__init__(f"guardian refused to connect to {address}: {detail}")
        self.address = address
        self.reason = reason
        self.detail = detail


class GuardedResolver(AbstractResolver):
    def __init__(self, policy: AddressPolicy, inner: AbstractResolver | None = None) -> None:
        self._policy = policy
        self._inner = inner

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        with phase(DNS_AND_GUARDIAN):
            return await self._resolve(host, port, family)

    async def _resolve(self, host: str, port: int, family: socket.AddressFamily) -> list[ResolveResult]:
        if self._inner is None:
            self._inner = ThreadedResolver()
        inner = self._inner
        try:
            answers = await asyncio.wait_for(inner.resolve(host, port, family=family), DNS_TIMEOUT_S)
        except TimeoutError:
            raise DnsFailure(f"{host} did not resolve within {DNS_TIMEOUT_S:g} s") from None
        except OSError:
            raise DnsFailure(f"{host} does not resolve") from None
        addresses = []
        for answer in answers:
            try:
                addresses.append(ipaddress.ip_address(answer["host"].split("%", 1)[0]))
            except ValueError:
                raise DnsFailure(f"{host} resolved to something that is not an address") from None
        # Any denied answer refuses the whole name: a name with one public and one private
        # address is an attack (or a misconfiguration) either way.
        self._policy.check_answers(host, addresses)
        return answers

    async def close(self) -> None:
        if self._inner is not None:
            await self._inner.close()


# Where a fetch wants to hear the address each of its requests is connected to (the evidence
# archive's WARC-IP-Address): a list the connector appends to, set by the fetch for its own task.
CONNECTED: contextvars.ContextVar[list[str | None] | None] = contextvars.ContextVar("connected", default=None)


class ReportingConnector(BrowserTCPConnector):
    """Tells the fetch that asks (``CONNECTED``) the peer address of every connection it is handed,
    new or reused: the response alone cannot, since a small body read at once releases it."""

    async def connect(self, req: Any, traces: Any, timeout: Any) -> Any:  # noqa: ASYNC109 (aiohttp's signature)
        connection = await super().connect(req, traces, timeout)
        heard = CONNECTED.get()
        if heard is not None:
            transport = connection.transport
            peer = transport.get_extra_info("peername") if transport is not None else None
            host = peer[0] if isinstance(peer, tuple) and peer and isinstance(peer[0], str) else None
            heard.append(host.split("%", 1)[0] if host is not None else None)
        return connection


def socket_factory(policy: AddressPolicy) -> aiohttp.connector.SocketFactoryType:
    def create(addr_info: AddrInfoType) -> socket.socket:
        family, type_, proto, _, sockaddr = addr_info
        host = str(sockaddr[0]).split("%", 1)[0]
        verdict = policy.classify(ipaddress.ip_address(host))
        if not verdict.allowed:
            raise SocketRefused(host, verdict.reason, verdict.detail)
        traced.connecting()
        return socket.socket(family=family, type=type_, proto=proto)

    return create


def tls_context(settings: Settings) -> ssl.SSLContext:
    """The system's trust store, plus RESEARCH_CA_BUNDLE when set; host names always verified."""
    context = ssl.create_default_context()
    if settings.ca_bundle:
        context.load_verify_locations(cafile=settings.ca_bundle)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return traced.timed(context)


def guarded_session(
    settings: Settings, policy: AddressPolicy, resolver: AbstractResolver | None = None
) -> aiohttp.ClientSession:
    """The fetch path's only session: guarded resolver and sockets, no proxies, no cookies."""
    connector = ReportingConnector(
        resolver=GuardedResolver(policy, resolver),
        socket_factory=socket_factory(policy),
        ssl=tls_context(settings),
        # Every new connection resolves through the guard; a cache would only add a second
        # place where an answer lives.
        use_dns_cache=False,
        # A job holds at most one connection at a time, so max_jobs bounds connections per host.
        limit=max(32, settings.max_jobs * 2),
        enable_cleanup_closed=True,
    )
    return aiohttp.ClientSession(
        connector=connector,
        cookie_jar=aiohttp.DummyCookieJar(),
        trust_env=False,
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
        max_line_size=8190,
        max_field_size=8190,
        raise_for_status=False,
        trace_configs=[traced.first_byte_trace()],
        # jobs/decoding.py undoes Content-Encoding itself, as browsers do, within the byte cap.
        auto_decompress=False,
        headers={
            "User-Agent": settings.user_agent,
            "Accept": (
                "text/html,application/xhtml+xml;q=0.9,text/plain;q=0.8,application/json;q=0.8,*/*;q=0.1"
            ),
            "Accept-Encoding": "gzip, deflate",
        },
    )
