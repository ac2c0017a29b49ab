"""Serving an aiohttp application on a port: the dashboard's and the worker's metrics endpoint."""

from __future__ import annotations

from aiohttp import web


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
