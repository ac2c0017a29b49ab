"""The egress proxy the rendering browser goes out through: every CONNECT judged like a fetch.

A client goes through the proxy to local TLS servers: 127.0.0.1 is allowed (as the tests' operator
allows it), 127.0.0.2 is refused, and a listener there must record nothing, ever.
"""

from __future__ import annotations

import asyncio
import ipaddress
import ssl
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.fake_dns import FakeResolver
from tests.support.fetching import connection_counter
from tests.support.tls import TestCA, TlsServer, serve
from worker.guardian.egress_proxy import EgressBounds, EgressProxy
from worker.guardian.policy import AddressPolicy

POLICY = AddressPolicy([ipaddress.ip_network("127.0.0.1/32")])


async def _hello(request: web.Request) -> web.Response:
    return web.Response(text="hello through the tunnel")


async def _big(request: web.Request) -> web.Response:
    return web.Response(body=b"x" * 400_000)


@pytest.fixture
async def site(ca: TestCA) -> AsyncIterator[TlsServer]:
    async with serve({"/": _hello, "/big": _big}, ca.server_context()) as server:
        yield server


def _client_tls(ca: TestCA) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca.bundle))
    return context


async def _get(proxy: EgressProxy, url: str, ca: TestCA) -> tuple[int, bytes]:
    async with aiohttp.ClientSession() as session:
        async with session.get(url, proxy=proxy.address, ssl=_client_tls(ca)) as response:
            return response.status, await response.read()


async def _connect_line(proxy: EgressProxy, line: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    try:
        writer.write(line)
        await writer.drain()
        return await asyncio.wait_for(reader.read(4096), 5)
    finally:
        writer.close()


def _proxy(port: int, resolver: FakeResolver | None = None, **bounds: int) -> EgressProxy:
    return EgressProxy(
        POLICY,
        EgressBounds(
            max_requests=bounds.get("max_requests", 50),
            max_bytes=bounds.get("max_bytes", 10_000_000),
            ports=frozenset({443, port}),
        ),
        resolver or FakeResolver({}),
    )


async def test_a_tunnel_to_an_allowed_address_carries_tls_end_to_end(site: TlsServer, ca: TestCA) -> None:
    async with _proxy(site.port) as proxy:
        status, body = await _get(proxy, site.url("/"), ca)
    assert (status, body) == (200, b"hello through the tunnel")
    assert proxy.log.tunnels == 1
    assert proxy.log.connected == [f"127.0.0.1:{site.port}"]
    assert proxy.log.bytes > len(body)


async def test_a_tunnel_to_a_refused_address_is_refused_and_reaches_nothing(site: TlsServer) -> None:
    async with connection_counter("127.0.0.2", site.port) as (port, seen), _proxy(port) as proxy:
        answer = await _connect_line(proxy, f"CONNECT 127.0.0.2:{port} HTTP/1.1\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 403")
    assert seen == []
    assert proxy.log.tunnels == 0
    assert any("loopback" in refusal for refusal in proxy.log.refused)


async def test_a_name_that_resolves_to_a_refused_address_is_refused(site: TlsServer) -> None:
    resolver = FakeResolver({"internal.test": ["127.0.0.2"]})
    async with connection_counter("127.0.0.2", site.port) as (port, seen), _proxy(port, resolver) as proxy:
        answer = await _connect_line(proxy, f"CONNECT internal.test:{port} HTTP/1.1\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 403")
    assert seen == []


async def test_a_name_that_rebinds_to_a_refused_address_gets_nothing_on_its_second_answer(
    site: TlsServer, ca: TestCA
) -> None:
    resolver = FakeResolver({"flip.test": lambda n: ["127.0.0.1"] if n == 1 else ["127.0.0.2"]})
    async with connection_counter("127.0.0.2", site.port) as (port, seen), _proxy(port, resolver) as proxy:
        status, _ = await _get(proxy, f"https://flip.test:{port}/", ca)
        answer = await _connect_line(proxy, f"CONNECT flip.test:{port} HTTP/1.1\r\n\r\n".encode())
    assert status == 200
    assert answer.startswith(b"HTTP/1.1 403")
    assert seen == []
    assert proxy.log.connected == [f"127.0.0.1:{port}"]  # pinned to the address it judged


async def test_plain_http_through_the_proxy_is_refused_and_never_forwarded() -> None:
    async with connection_counter("127.0.0.1") as (port, seen), _proxy(port) as proxy:
        answer = await _connect_line(
            proxy, f"GET http://127.0.0.1:{port}/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
        )
    assert answer.startswith(b"HTTP/1.1 403")
    assert seen == []


async def test_a_port_the_render_does_not_allow_is_refused() -> None:
    async with connection_counter("127.0.0.1") as (port, seen), _proxy(8443) as proxy:
        answer = await _connect_line(proxy, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 403")
    assert seen == []


async def test_a_tunnel_whose_first_bytes_are_not_tls_is_cut() -> None:
    received: list[bytes] = []

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        received.append(await reader.read(100))
        writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with _proxy(port) as proxy:
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            writer.write(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
            await writer.drain()
            assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
            writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")  # ws:// or http:// smuggled on a tls port
            await writer.drain()
            assert await asyncio.wait_for(reader.read(100), 5) == b""
            writer.close()
    finally:
        server.close()
        await server.wait_closed()
    assert received == [b""]  # the upstream saw a connection open and close, never the request
    assert any("not_tls" in refusal for refusal in proxy.log.refused)


async def test_tunnels_past_the_request_bound_are_refused(site: TlsServer, ca: TestCA) -> None:
    async with _proxy(site.port, max_requests=2) as proxy:
        for _ in range(2):
            assert (await _get(proxy, site.url("/"), ca))[0] == 200
        answer = await _connect_line(proxy, f"CONNECT 127.0.0.1:{site.port} HTTP/1.1\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 429")
    assert proxy.log.tunnels == 2


async def test_bytes_past_the_byte_bound_cut_the_tunnel(site: TlsServer, ca: TestCA) -> None:
    async with _proxy(site.port, max_bytes=50_000) as proxy:
        with pytest.raises(aiohttp.ClientError):
            await _get(proxy, site.url("/big"), ca)
    assert proxy.log.over_bounds
    assert proxy.log.bytes <= 50_000 + 65_536


AUTHORITIES = st.one_of(
    st.text(min_size=0, max_size=60),
    st.builds(
        lambda host, port: f"{host}:{port}",
        st.sampled_from(
            [
                "127.0.0.2",
                "[::1]",
                "0x7f000002",
                "2130706434",
                "127.2",
                "localhost",
                "user@127.0.0.2",
                "[::ffff:127.0.0.2]",
                "127.0.0.2%2e",
                "internal.test",
                "169.254.169.254",
                "0.0.0.0",
            ]
        ),
        st.integers(min_value=-5, max_value=70000),
    ),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(authority=AUTHORITIES, method=st.sampled_from(["CONNECT", "GET", "connect", "POST"]))
def test_no_request_line_reaches_a_refused_address(authority: str, method: str) -> None:
    async def attempt() -> None:
        resolver = FakeResolver({"internal.test": ["127.0.0.2"], "localhost": ["127.0.0.2"]})
        async with connection_counter("127.0.0.2") as (port, seen), _proxy(port, resolver) as proxy:
            line = f"{method} {authority} HTTP/1.1\r\n\r\n".encode("utf-8", "replace")
            answer = await _connect_line(proxy, line)
            assert answer == b"" or answer.startswith((b"HTTP/1.1 403", b"HTTP/1.1 429"))
            assert seen == []
            assert proxy.log.tunnels == 0

    asyncio.run(attempt())
