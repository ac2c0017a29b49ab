"""A worker's Prometheus ``/metrics`` endpoint, served on the worker's own event loop."""

from __future__ import annotations

import logging

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from worker.logs import fields
from worker.metrics import Metrics
from worker.net.serving import serve

log = logging.getLogger("research.metrics")


async def start(metrics: Metrics, port: int, host: str | None = None) -> web.AppRunner:
    """Serve /metrics on every interface (IPv4 and IPv6) unless ``host`` narrows it.

    Every interface by default, because Prometheus scrapes a pod or container from outside it. The
    endpoint carries counts and timings only, labelled by bounded sets (never a URL, a report id or
    a key), so it has no authentication; keep the port off the public internet.
    """

    async def handle(request: web.Request) -> web.Response:
        body = generate_latest(metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/metrics", handle)
    runner = await serve(app, host, port)
    log.info("serving metrics", extra=fields(host=host or "*", port=port))
    return runner
