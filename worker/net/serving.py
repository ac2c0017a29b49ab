"""Serving an HTTP application on a port: the dashboard's and the worker's metrics endpoint, and
whether the host it binds is loopback (the dashboard and the MCP server guard such a bind)."""

from __future__ import annotations

import ipaddress

from aiohttp import web


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback address, bracketed or not (``[::1]``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


async def serve(app: web.Application, host: str | None, port: int) -> web.AppRunner:
    """Start ``app`` on host:port (no host: every interface; port 0 picks a free one, read it from
    ``runner.addresses``); a port that cannot be bound raises, with nothing left running."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner
