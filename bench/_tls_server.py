"""A TLS page server for benchmarks, in its own process: ``python -m bench._tls_server CERT_DIR PORT``."""

from __future__ import annotations

import asyncio
import ssl
import sys
from pathlib import Path

from aiohttp import web

from bench._pages import article_page, page_sizes

PAGES = 64


def build_app() -> web.Application:
    pages = [article_page(i, size) for i, size in enumerate(page_sizes(PAGES))]
    big = [article_page(1000 + i, 2 * 1024 * 1024) for i in range(4)]

    async def handler(request: web.Request) -> web.Response:
        index = int(request.match_info["n"]) % PAGES
        return web.Response(body=pages[index], content_type="text/html", charset="utf-8")

    async def big_page(request: web.Request) -> web.Response:
        return web.Response(body=big[int(request.match_info["n"]) % len(big)], content_type="text/html")

    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(float(request.query.get("s", "2")))
        return await handler(request)

    async def fail(request: web.Request) -> web.Response:
        return web.Response(status=int(request.query.get("status", "503")), text="unavailable")

    async def huge(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/html"})
        await response.prepare(request)
        chunk = b"<p>" + b"filler words " * 5000 + b"</p>"
        try:
            for _ in range(200):
                await response.write(chunk)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        return response

    app = web.Application()
    app.router.add_get("/page/{n}", handler)
    app.router.add_get("/big/{n}", big_page)
    app.router.add_get("/slow/{n}", slow)
    app.router.add_get("/fail/{n}", fail)
    app.router.add_get("/huge/{n}", huge)
    return app


def main() -> None:
    cert_dir = Path(sys.argv[1])
    port = int(sys.argv[2])
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_dir / "server.pem")
    web.run_app(build_app(), host="127.0.0.1", port=port, ssl_context=context, print=None, access_log=None)


if __name__ == "__main__":
    main()
