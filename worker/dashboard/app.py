"""The dashboard's aiohttp app: routes, the shared snapshot, auth, headers and honest health.

``/`` (HTML that reloads itself with a meta refresh, no script at all), ``/job/{id}`` (one job),
``/api/state`` (the snapshot as JSON, with the same filters as ``/``), ``/dashboard.css``,
``/favicon.svg`` and an unauthenticated ``/healthz`` (the dashboard process itself). There is no
route that writes: the page is for watching, and enqueueing is the orchestrator's job. When Redis
cannot be read, ``/``, ``/job/{id}`` and ``/api/state`` answer 503 and say why, so an uptime
check sees the outage the page shows.

What the pages show comes from the web (URLs, page-chosen redirect targets) and from the agent
(queries), so every value is escaped by the templates and no URL is rendered as a link: an
operator's click must never be a hostile page's navigation. The only links lead to the
dashboard's own paths. No key, password or page text is shown, only previews.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any, TypeVar

import aiohttp_jinja2
import orjson
from aiohttp import web
from aiohttp.typedefs import Handler
from arq.connections import ArqRedis
from redis.exceptions import RedisError

import worker.dashboard.job as job
import worker.dashboard.templating as templating
from worker.config import Settings, redact_url
from worker.dashboard.auth import allowed_host_names, authorized
from worker.dashboard.data import Snapshot, collect, open_redis
from worker.dashboard.filters import BadFilter, Filters
from worker.dashboard.views import index_context, state_document
from worker.logs import fields
from worker.net.serving import is_loopback
from worker.net.serving import serve as serve_app

log = logging.getLogger("research.dashboard")
T = TypeVar("T")

# One snapshot serves every viewer for this long, so ten open tabs cost Redis what one does.
CACHE_S = 2.0
COLLECT_TIMEOUT_S = 5.0
EXIT_OK = 0
EXIT_CANNOT_LISTEN = 1

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


class Unavailable(Exception):
    """Redis could not be read; the message names where, and the failure's class only."""


def serve(settings: Settings, host: str, port: int) -> int:
    """Serve until SIGINT or SIGTERM; 0 on a clean stop, 1 when the address cannot be bound."""
    return asyncio.run(_serve_until_signal(settings, host, port))


async def _serve_until_signal(settings: Settings, host: str, port: int) -> int:
    try:
        runner = await start(settings, host, port)
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        sys.stderr.write(f"research-worker: the dashboard cannot listen on {host}:{port}: {reason}\n")
        return EXIT_CANNOT_LISTEN
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)
    try:
        await stopping.wait()
    finally:
        await runner.cleanup()
    return EXIT_OK


async def start(
    settings: Settings,
    host: str,
    port: int,
    *,
    cache_s: float = CACHE_S,
    collect_timeout_s: float = COLLECT_TIMEOUT_S,
) -> web.AppRunner:
    """Start serving on host:port (0 picks a free port; read it from ``runner.addresses``)."""
    app = build_app(settings, host, cache_s=cache_s, collect_timeout_s=collect_timeout_s)
    runner = await serve_app(app, host, port)
    bound = runner.addresses[0][1] if runner.addresses else port
    where = f"http://{host}:{bound}/" if ":" not in host else f"http://[{host}]:{bound}/"
    log.info(
        "serving the dashboard",
        extra=fields(url=where, auth=settings.dashboard_auth is not None, queue=settings.queue_name),
    )
    if settings.dashboard_auth is None and not is_loopback(host):
        log.warning(
            "the dashboard listens beyond loopback without RESEARCH_DASHBOARD_AUTH; "
            "anyone who can reach it sees report ids and queries",
            extra=fields(host=host),
        )
    return runner


class Dashboard:
    """The Redis connection and the shared snapshot behind every request."""

    def __init__(
        self, settings: Settings, cache_s: float, collect_timeout_s: float = COLLECT_TIMEOUT_S
    ) -> None:
        self.settings = settings
        self._cache_s = cache_s
        self._collect_timeout_s = collect_timeout_s
        self._redis: ArqRedis | None = None
        self._snapshot: Snapshot | None = None
        self._taken_at = 0.0
        self._lock = asyncio.Lock()

    async def snapshot(self) -> Snapshot:
        async with self._lock:
            fresh = time.monotonic() - self._taken_at < self._cache_s
            if self._snapshot is None or not fresh:
                try:
                    self._snapshot = await self._read(lambda redis: collect(redis, self.settings))
                except Unavailable as exc:
                    self._snapshot = Snapshot(generated_at=time.time(), queue=None, error=str(exc))
                self._taken_at = time.monotonic()
            return self._snapshot

    async def job(self, job_id: str) -> job.JobDetail | None:
        """One job; its worker and measures come from the shared snapshot's recent results."""
        snapshot = await self.snapshot()
        if snapshot.error is not None:
            raise Unavailable(snapshot.error)
        line = snapshot.line_of(job_id)
        return await self._read(
            lambda redis: job.read_job(redis, self.settings.queue_name, job_id, line, time.time())
        )

    async def _read(self, read: Callable[[ArqRedis], Awaitable[T]]) -> T:
        try:
            async with asyncio.timeout(self._collect_timeout_s):
                if self._redis is None:
                    self._redis = await open_redis(self.settings)
                return await read(self._redis)
        except (RedisError, OSError, TimeoutError) as exc:
            where = redact_url(self.settings.redis_target.url)
            log.warning("cannot read redis", extra=fields(redis_url=where, error=type(exc).__name__))
            # The class of the failure only: a driver's message may quote more than we want shown.
            raise Unavailable(f"cannot read Redis at {where}: {type(exc).__name__}") from None

    async def close(self) -> None:
        if self._redis is not None:
            await self._redis.aclose()
            self._redis = None


def build_app(
    settings: Settings, host: str, *, cache_s: float = CACHE_S, collect_timeout_s: float = COLLECT_TIMEOUT_S
) -> web.Application:
    dashboard = Dashboard(settings, cache_s, collect_timeout_s)
    allowed_hosts = allowed_host_names(host)
    package = resources.files("worker.dashboard")
    stylesheet_text = package.joinpath("static/dashboard.css").read_text(encoding="utf-8")
    favicon_text = package.joinpath("static/favicon.svg").read_text(encoding="utf-8")

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if allowed_hosts is not None and (request.url.host or "") not in allowed_hosts:
            raise web.HTTPMisdirectedRequest(text="this dashboard answers to loopback host names only\n")
        if request.path == "/healthz" or settings.dashboard_auth is None:
            return await handler(request)
        user, password = settings.dashboard_auth
        if not authorized(request.headers.get("Authorization"), user, password):
            raise web.HTTPUnauthorized(
                text="authentication required\n",
                headers={"WWW-Authenticate": 'Basic realm="research-worker", charset="UTF-8"'},
            )
        return await handler(request)

    def page(request: web.Request, name: str, context: dict[str, object], status: int = 200) -> web.Response:
        base = {"queue_name": settings.queue_name, "refresh_s": None, "error": None}
        return aiohttp_jinja2.render_template(name, request, {**base, **context}, status=status)

    def message(
        request: web.Request, status: int, heading: str, text: str, error: str | None = None
    ) -> web.Response:
        context = {"heading": heading, "message": text, "generated_at": time.time(), "error": error}
        return page(request, "message.html", context, status)

    async def index(request: web.Request) -> web.Response:
        try:
            filters = Filters.parse(request.query)
        except BadFilter as exc:
            return message(request, 400, "Bad filter", str(exc))
        snap = await dashboard.snapshot()
        return page(request, "index.html", index_context(snap, filters), 503 if snap.error else 200)

    async def job_page(request: web.Request) -> web.Response:
        job_id = request.match_info["job_id"]
        try:
            detail = await dashboard.job(job_id)
        except Unavailable as exc:
            return message(request, 503, "Redis cannot be read", "The job cannot be shown now.", str(exc))
        if detail is None:
            text = (
                f"Redis holds nothing about the job {job_id[: job.MAX_JOB_ID]}: it never existed here, "
                "or its result expired."
            )
            return message(request, 404, "No such job", text)
        context = {
            "job": detail,
            "filters": Filters(),
            "generated_at": time.time(),
            "string_preview": job.STRING_PREVIEW,
            "list_preview": job.LIST_PREVIEW,
        }
        return page(request, "job.html", context)

    async def screenshot(request: web.Request) -> web.Response:
        """A rendered job's screenshot, read from the evidence archive (``worker.archive``)."""
        try:
            detail = await dashboard.job(request.match_info["job_id"])
        except Unavailable:
            raise web.HTTPServiceUnavailable(text="Redis cannot be read\n") from None
        if detail is None or detail.screenshot_record is None:
            raise web.HTTPNotFound(text="this job has no screenshot\n")
        png = await read_screenshot(settings, detail.screenshot_record)
        if png is None:
            raise web.HTTPNotFound(text="the screenshot is not in the archive (off, gone, or unreadable)\n")
        return web.Response(body=png, content_type="image/png")

    async def state(request: web.Request) -> web.Response:
        try:
            filters = Filters.parse(request.query)
        except BadFilter as exc:
            return web.json_response({"error": str(exc)}, status=400, dumps=_json)
        snap = await dashboard.snapshot()
        return web.Response(
            body=orjson.dumps(state_document(snap, filters)),
            content_type="application/json",
            status=503 if snap.error else 200,
        )

    async def stylesheet(request: web.Request) -> web.Response:
        return web.Response(text=stylesheet_text, content_type="text/css")

    async def favicon(request: web.Request) -> web.Response:
        return web.Response(text=favicon_text, content_type="image/svg+xml")

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def add_security_headers(request: web.Request, response: web.StreamResponse) -> None:
        response.headers.update(SECURITY_HEADERS)

    async def close(app: web.Application) -> None:
        await dashboard.close()

    app = web.Application(middlewares=[guard])
    templating.setup(app)
    app.router.add_get("/", index)
    app.router.add_get("/job/{job_id:[^/]+}", job_page)
    app.router.add_get("/job/{job_id:[^/]+}/screenshot.png", screenshot)
    app.router.add_get("/api/state", state)
    app.router.add_get("/dashboard.css", stylesheet)
    app.router.add_get("/favicon.svg", favicon)
    app.router.add_get("/healthz", healthz)
    app.on_response_prepare.append(add_security_headers)
    app.on_cleanup.append(close)
    return app


async def read_screenshot(settings: Settings, record: str) -> bytes | None:
    from worker.archive.screenshots import screenshot_png
    from worker.archive.service import open_store

    store = open_store(settings.archive, settings.archive_endpoint)
    if store is None:
        return None
    try:
        return await screenshot_png(store, record)
    finally:
        await store.close()


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()
