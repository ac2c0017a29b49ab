"""A worker's Prometheus ``/metrics`` endpoint, served on the worker's own event loop."""

from __future__ import annotations

import logging

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from worker.logs import fields
from worker.metrics import Metrics

log = logging.getLogger("research.metrics")


async def start(metrics: Metrics, port: int, host: str = "0.0.0.0") -> web.AppRunner:  # noqa: S104
    """Serve /metrics; bound to every interface by default so Prometheus can scrape a pod."""

    async def handle(request: web.Request) -> web.Response:
        body = generate_latest(metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/metrics", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    log.info("serving metrics", extra=fields(port=port))
    return runner
