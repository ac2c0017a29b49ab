"""``research-worker dashboard``: a read-only monitoring page over arq's keys and ours.

One aiohttp app: ``/`` (HTML that reloads itself with a meta refresh, no script at all),
``/api/state`` (the same snapshot as JSON), ``/dashboard.css`` and an unauthenticated ``/healthz``.
It has no route that writes: the page is for watching, and enqueueing is the orchestrator's job.

What it shows comes from the web (URLs, page-chosen redirect targets) and from the agent (queries),
so every value is HTML-escaped and no URL is rendered as a link: an operator's click must never be
a hostile page's navigation. It never shows a key, a password or page text, only 120-character
previews of a job's target.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import html
import ipaddress
import logging
import os
import signal
import sys
import time
from collections.abc import Iterable, Sequence

import orjson
from aiohttp import web
from aiohttp.typedefs import Handler
from arq.connections import ArqRedis
from redis.exceptions import RedisError

from worker.config import Secret, Settings, redact_url
from worker.dashboard_data import MAX_ROWS, JobRow, Snapshot, collect, open_redis
from worker.logs import fields

log = logging.getLogger("research.dashboard")

REFRESH_S = 5
# One snapshot serves every viewer for this long, so ten open tabs cost Redis what one does.
CACHE_S = 2.0
COLLECT_TIMEOUT_S = 5.0
EXIT_OK = 0
EXIT_CANNOT_LISTEN = 1

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})

CSS = """
:root { color-scheme: light; --ok: #16794c; --bad: #b42318; --muted: #5f6b7a; --line: #d9dee5; }
* { box-sizing: border-box; }
body { font: 14px/1.4 system-ui, sans-serif; margin: 0 auto; padding: 16px 24px; max-width: 1400px;
       color: #1d2430; background: #f7f8fa; }
header { display: flex; align-items: baseline; gap: 16px; flex-wrap: wrap; }
h1 { font-size: 20px; margin: 0; }
h2 { font-size: 16px; margin: 24px 0 8px; }
.meta, .note { color: var(--muted); }
.error { background: #fdecea; border: 1px solid var(--bad); color: var(--bad); padding: 8px 12px; }
.cards { display: flex; gap: 12px; flex-wrap: wrap; margin: 16px 0 0; padding: 0; }
.card { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 8px 14px;
        min-width: 130px; }
.card dt { color: var(--muted); font-size: 12px; }
.card dd { margin: 0; font-size: 22px; font-variant-numeric: tabular-nums; }
table { border-collapse: collapse; width: 100%; background: #fff; border: 1px solid var(--line); }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { background: #eef1f5; font-weight: 600; font-size: 12px; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.target { max-width: 420px; overflow-wrap: anywhere; font-family: ui-monospace, monospace;
            font-size: 12px; }
code { font-family: ui-monospace, monospace; font-size: 12px; overflow-wrap: anywhere; }
.ok { color: var(--ok); font-weight: 600; }
.bad { color: var(--bad); font-weight: 600; }
.chips { display: flex; gap: 8px; flex-wrap: wrap; margin: 0 0 8px; padding: 0; list-style: none; }
.chips li { background: #fff; border: 1px solid var(--line); border-radius: 12px; padding: 1px 10px; }
.full { color: var(--bad); }
"""


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


async def start(settings: Settings, host: str, port: int, *, cache_s: float = CACHE_S) -> web.AppRunner:
    """Start serving on host:port (0 picks a free port; read it from ``runner.addresses``)."""
    runner = web.AppRunner(build_app(settings, host, cache_s=cache_s), access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except BaseException:
        await runner.cleanup()
        raise
    bound = runner.addresses[0][1] if runner.addresses else port
    where = f"http://{host}:{bound}/" if ":" not in host else f"http://[{host}]:{bound}/"
    log.info(
        "serving the dashboard",
        extra=fields(url=where, auth=settings.dashboard_auth is not None, queue=settings.queue_name),
    )
    if settings.dashboard_auth is None and not _is_loopback(host):
        log.warning(
            "the dashboard listens beyond loopback without RESEARCH_DASHBOARD_AUTH; "
            "anyone who can reach it sees report ids and queries",
            extra=fields(host=host),
        )
    return runner


class Dashboard:
    """The Redis connection and the shared snapshot behind every request."""

    def __init__(self, settings: Settings, cache_s: float) -> None:
        self.settings = settings
        self._cache_s = cache_s
        self._redis: ArqRedis | None = None
        self._snapshot: Snapshot | None = None
        self._taken_at = 0.0
        self._lock = asyncio.Lock()

    async def snapshot(self) -> Snapshot:
        async with self._lock:
            fresh = time.monotonic() - self._taken_at < self._cache_s
            if self._snapshot is None or not fresh:
                self._snapshot = await self._collect()
                self._taken_at = time.monotonic()
            return self._snapshot

    async def _collect(self) -> Snapshot:
        try:
            async with asyncio.timeout(COLLECT_TIMEOUT_S):
                if self._redis is None:
                    self._redis = await open_redis(self.settings)
                return await collect(self._redis, self.settings)
        except (RedisError, OSError, TimeoutError) as exc:
            where = redact_url(self.settings.redis_target.url)
            log.warning("cannot read redis", extra=fields(redis_url=where, error=type(exc).__name__))
            # The class of the failure only: a driver's message may quote more than we want shown.
            return Snapshot(
                generated_at=time.time(),
                queue=None,
                error=f"cannot read Redis at {where}: {type(exc).__name__}",
            )

    async def close(self) -> None:
        if self._redis is not None:
            await self._redis.aclose()
            self._redis = None


def build_app(settings: Settings, host: str, *, cache_s: float = CACHE_S) -> web.Application:
    dashboard = Dashboard(settings, cache_s)
    # Bound to loopback, the page is reachable from this machine's browser, and so from any web
    # page it opens: a hostile site can rebind its own name to 127.0.0.1 and read the page as
    # same-origin. A Host header that is not a loopback name gives that away.
    allowed_hosts = LOOPBACK_NAMES | {host} if _is_loopback(host) else None

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

    async def page(request: web.Request) -> web.Response:
        return web.Response(text=render(await dashboard.snapshot()), content_type="text/html")

    async def state(request: web.Request) -> web.Response:
        body = orjson.dumps((await dashboard.snapshot()).as_dict())
        return web.Response(body=body, content_type="application/json")

    async def stylesheet(request: web.Request) -> web.Response:
        return web.Response(text=CSS, content_type="text/css")

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def add_security_headers(request: web.Request, response: web.StreamResponse) -> None:
        response.headers.update(SECURITY_HEADERS)

    async def close(app: web.Application) -> None:
        await dashboard.close()

    app = web.Application(middlewares=[guard])
    app.router.add_get("/", page)
    app.router.add_get("/api/state", state)
    app.router.add_get("/dashboard.css", stylesheet)
    app.router.add_get("/healthz", healthz)
    app.on_response_prepare.append(add_security_headers)
    app.on_cleanup.append(close)
    return app


def authorized(header: str | None, user: str, password: Secret) -> bool:
    if not header:
        return False
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic":
        return False
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True)
    except (binascii.Error, ValueError):
        return False
    given_user, sep, given_password = decoded.partition(b":")
    if not sep:
        return False
    # Digests first, so the comparison takes the same time whatever the lengths; both parts are
    # always compared, so the time taken never says which one was wrong.
    user_ok = hmac.compare_digest(_digest(given_user), _digest(user.encode()))
    password_ok = hmac.compare_digest(_digest(given_password), _digest(password.reveal().encode()))
    return user_ok & password_ok


def _digest(value: bytes) -> bytes:
    return hashlib.sha256(value).digest()


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def e(value: object) -> str:
    """Every value on the page goes through here: report ids, URLs and queries can carry markup."""
    return html.escape("" if value is None else str(value), quote=True)


# A table cell: its CSS class ("" for none) and its content, already escaped.
Cell = tuple[str, str]


def render(snap: Snapshot) -> str:
    queue_name = snap.queue.name if snap.queue is not None else ""
    generated = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(snap.generated_at))
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="refresh" content="{REFRESH_S}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>research-worker · {e(queue_name)}</title>",
        '<link rel="stylesheet" href="/dashboard.css">',
        "</head><body>",
        "<header><h1>research-worker</h1>",
        f'<p class="meta">queue <code id="queue-name">{e(queue_name)}</code> · updated '
        f'<time id="generated-at">{e(generated)}</time> · refreshes every {REFRESH_S} s · read-only</p>',
        "</header>",
    ]
    if snap.error:
        parts.append(f'<p class="error" id="error">{e(snap.error)}</p>')
    parts += _queue_cards(snap)
    parts += _workers(snap)
    parts += _jobs("in_progress", "Jobs in progress", snap.in_progress, snap, running=True)
    parts += _jobs("waiting", "Next in the queue", snap.waiting, snap, running=False)
    parts += _recent(snap)
    parts += _budgets(snap)
    parts += _spend(snap)
    parts.append(f'<p class="note">Each table shows at most {MAX_ROWS} rows.</p></body></html>')
    return "\n".join(parts)


def _queue_cards(snap: Snapshot) -> list[str]:
    q = snap.queue
    if q is None:
        return []
    cards = [
        ("queue-depth", "jobs in the queue", q.depth),
        ("queue-waiting", "waiting (due)", q.waiting),
        ("queue-in-progress", "in progress", q.in_progress),
        ("queue-deferred", "deferred", q.deferred),
        ("oldest-waiting", "oldest waiting", age(q.oldest_waiting_age_s)),
        ("workers-alive", "workers alive", sum(not w.stale for w in snap.workers)),
    ]
    items = "".join(
        f'<div class="card"><dt>{e(label)}</dt><dd id="{key}">{e(value)}</dd></div>'
        for key, label, value in cards
    )
    return [f'<dl class="cards" id="queue">{items}</dl>']


def _workers(snap: Snapshot) -> list[str]:
    rows = [
        [
            _code(w.worker_id),
            _text(w.host),
            _num(w.pid),
            _status(age(w.beat_age_s), good=not w.stale),
            _text(age(w.uptime_s)),
            _num(w.jobs_complete),
            _num(w.jobs_failed),
            _num(w.jobs_retried),
            _num(f"{w.jobs_ongoing} / {w.max_jobs if w.max_jobs is not None else '?'}"),
        ]
        for w in snap.workers
    ]
    head = ["worker", "host", "pid", "last beat", "up", "done", "failed", "retried", "in flight"]
    return _section("workers", f"Workers ({len(snap.workers)})", head, rows, snap)


def _jobs(key: str, title: str, jobs: Sequence[JobRow], snap: Snapshot, *, running: bool) -> list[str]:
    rows = []
    for job in jobs:
        cells = [_code(job.job_id), _text(job.tool), _code(job.report_id), _target(job.target)]
        cells.append(_text(age(job.age_s)))
        if running:
            cells.append(_text(age(job.running_s)))
        cells.append(_num(job.job_try))
        rows.append(cells)
    head = ["job", "tool", "report", "target", "since enqueue", *(["running"] if running else []), "try"]
    return _section(key, f"{title} ({len(jobs)})", head, rows, snap)


def _recent(snap: Snapshot) -> list[str]:
    rows = [
        [
            _text(f"{age(r.age_s)} ago" if r.age_s is not None else None),
            _text(r.tool),
            _code(r.report_id),
            _status(r.outcome, good=r.outcome == "ok"),
            _target(r.target),
            _num(f"{r.duration_ms:.0f} ms" if r.duration_ms is not None else None),
            _code(r.job_id),
        ]
        for r in snap.recent
    ]
    head = ["finished", "tool", "report", "outcome", "target", "took", "job"]
    section = _section("recent", f"Recent results ({len(snap.recent)})", head, rows, snap)
    chips = "".join(
        f'<li><span class="{"ok" if kind == "ok" else "bad"}">{e(kind)}</span> {e(count)}</li>'
        for kind, count in snap.outcomes.items()
    )
    if chips:
        section.insert(1, f'<ul class="chips" id="outcomes">{chips}</ul>')
    return section


def _budgets(snap: Snapshot) -> list[str]:
    rows = [
        [
            _code(b.report_id),
            _used(b.search_used, b.search_limit),
            _used(b.fetch_used, b.fetch_limit),
            _num(b.menu_size),
            _num(f"${b.cost_usd:.4f}" if b.cost_usd is not None else None),
            _text(age(b.expires_in_s)),
        ]
        for b in snap.budgets
    ]
    head = ["report", "searches", "fetches", "URL menu", "spend", "window left"]
    return _section("budgets", f"Budgets ({len(snap.budgets)})", head, rows, snap)


def _spend(snap: Snapshot) -> list[str]:
    rows = [
        [
            _text(s.day),
            _code(s.org),
            _text(s.usage_source),
            _num(s.searches),
            _num(s.prompt_tokens),
            _num(s.completion_tokens),
            _num(f"${s.cost_usd:.4f}"),
        ]
        for s in snap.spend
    ]
    head = [
        "day (UTC)",
        "organization",
        "usage source",
        "searches",
        "prompt tokens",
        "completion tokens",
        "cost",
    ]
    return _section("spend", f"Search spend ({len(snap.spend)})", head, rows, snap)


def _section(key: str, title: str, head: Iterable[str], rows: list[list[Cell]], snap: Snapshot) -> list[str]:
    out = [f'<section id="{key}"><h2>{e(title)}</h2>']
    if key in snap.partial:
        out.append('<p class="note">Partial: the scan stopped at its bound; more exist.</p>')
    if not rows:
        out.append('<p class="note">None.</p></section>')
        return out
    header = "".join(f"<th>{e(h)}</th>" for h in head)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="{css}">{content}</td>' if css else f"<td>{content}</td>" for css, content in row
        )
        + "</tr>"
        for row in rows
    )
    out.append(f"<table><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table></section>")
    return out


def _text(value: object) -> Cell:
    return "", e("–" if value is None else value)


def _code(value: object) -> Cell:
    return "", f"<code>{e(value)}</code>"


def _target(value: object) -> Cell:
    # Shown as text, never as a link: these URLs came from the web.
    return "target", e(value)


def _num(value: object) -> Cell:
    return "num", e("–" if value is None else value)


def _status(value: object, *, good: bool) -> Cell:
    return "", f'<span class="{"ok" if good else "bad"}">{e(value)}</span>'


def _used(used: int, limit: int) -> Cell:
    css = ' class="full"' if used >= limit else ""
    return "num", f"<span{css}>{e(used)} / {e(limit)}</span>"


def age(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min"
    return f"{hours // 24} d {hours % 24} h"
