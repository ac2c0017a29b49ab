"""Local TLS servers for fetch tests: a trustme CA, certificates for test names, aiohttp apps."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import trustme
from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# Every name a test may use; the fake resolver maps them to 127.0.0.x. (OpenSSL will not match a
# wildcard directly under a top-level label, so the names under .test are listed one by one.)
CERT_NAMES = (
    "127.0.0.1",
    "127.0.0.2",
    "localhost",
    "site.test",
    "*.site.test",
    "other.test",
    "*.other.test",
    "flip.test",
    "pinned.test",
    "mixed.test",
    "internal.test",
    "page.test",
)


@dataclass
class TestCA:
    __test__ = False

    ca: trustme.CA
    bundle: Path

    def server_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.ca.issue_cert(*CERT_NAMES).configure_cert(context)
        return context


def make_ca(directory: Path) -> TestCA:
    ca = trustme.CA()
    bundle = directory / "test-ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    return TestCA(ca, bundle)


@dataclass
class TlsServer:
    host: str
    port: int

    def url(self, path: str = "/", name: str | None = None) -> str:
        return f"https://{name or self.host}:{self.port}{path}"


@asynccontextmanager
async def serve(
    routes: dict[str, Handler],
    context: ssl.SSLContext | None,
    host: str = "127.0.0.1",
    port: int = 0,
    **app_kwargs: object,
) -> AsyncIterator[TlsServer]:
    app = web.Application(**app_kwargs)  # type: ignore[arg-type]
    for path, handler in routes.items():
        app.router.add_route("*", path, handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=context)
    await site.start()
    server = site._server
    assert server is not None and server.sockets  # type: ignore[attr-defined]
    bound = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
    try:
        yield TlsServer(host, bound)
    finally:
        await runner.cleanup()
