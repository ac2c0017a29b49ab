"""One render: the document the guarded fetch read, run in a fresh browser whose only way out is
its own egress proxy, then read back as HTML with what its stylesheets hide taken out.

The document itself is not fetched by the browser: the fetcher already read it through the
guardian, the URL menu and the fetch's redirect rules (every hop judged), and the browser is handed
those bytes for the final URL. Everything the page then asks for goes through the browser's route
table here, then the proxy:

- a navigation of the page itself while it loads (meta refresh, ``location = ...``, a form's
  submit) is followed a few times, each judged first (navigation.py), so the page is read where it
  sends a reader; past the bound, or refused, it is answered "204 No Content" and the page stays;
- any request that is not https (``http:``, ``ws:``, ``ftp:``, ``file:``, ``chrome:``) is refused
  before it is made; the proxy would refuse it as well;
- popups are closed as they open (``--block-new-web-contents`` stops most before that);
- the rest (subresources, frames, XHR and fetch, EventSource, WebSocket) is a CONNECT tunnel the
  proxy judges: resolved and pinned like a fetch, 443-style ports, TLS only, counted; the proxy
  opens tunnels only to hosts the page's own requests named here, so the browser's background
  traffic (sign-in, updates), which no flag quite silences, goes nowhere.

The page gets until its ``load`` (bounded), then until it settles (settle.py: no request in flight
and no change to its DOM for a quiet window, bounded), then its DOM is read: what its computed
style and layout hide from a reader is removed and its characters counted (visible.py), and the
HTML is serialized, cut at the byte cap; the screenshot is taken at the same time (screenshot.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from jobs.render import screenshot
from jobs.render.browser import BrowserLauncher, Limits, Watch
from jobs.render.navigation import MAX_NAVIGATIONS, REFRESH_DELAY, REFRESH_WAIT_S, Navigations
from jobs.render.pool import Browsers
from jobs.render.settle import QUIET_S, Settle
from jobs.render.visible import READ_DOM
from worker.errors import GuardianRefusal, ResearchError, Timeout, UnsupportedContentType
from worker.guardian.egress_proxy import EgressBounds, EgressLog
from worker.guardian.urls import parse_https_url

if TYPE_CHECKING:
    from aiohttp.abc import AbstractResolver
    from playwright.async_api import Page, Playwright, Request, Route, WebSocketRoute

    from worker.guardian.policy import AddressPolicy

# Of the render's wall clock: what is kept back from the load for the read (at least, and a share
# of the whole, since a loaded machine slows the read as much as the load); what is kept back at
# the end for handing the browser back (the same way); the longest wait after load for the page
# to settle (settle.py); the bound on reading the DOM back.
READ_RESERVE_S = 1.5
CLOSE_RESERVE_S = 0.5
RESERVE_SHARE = 0.08
RESERVE_MAX_S = 5.0
LATE_S = 0.5  # an error this close to the deadline is the deadline's
QUIET_MAX_S = 2.0
READ_S = 3.0
MAX_REREADS = 2  # reads a navigation may interrupt
REFUSED_QUIET_S = 0.5  # after a refused navigation, for the requests the page's scripts still make
HTTPS = "https:"


def reserves(seconds: float) -> tuple[float, float]:
    """Of a render given ``seconds``: what is kept back from the page's load for reading it, and
    what is kept back from both for handing its browser back."""
    share = seconds * RESERVE_SHARE
    return min(RESERVE_MAX_S, max(READ_RESERVE_S, share)), min(RESERVE_MAX_S, max(CLOSE_RESERVE_S, share))


@dataclass(frozen=True)
class RenderBounds:
    max_requests: int
    max_bytes: int  # through the proxy, both ways
    dom_bytes: int  # the serialized DOM (the fetch's byte cap)
    memory_bytes: int
    ports: frozenset[int]


@dataclass
class Rendered:
    html: bytes  # the serialized DOM, UTF-8, at most dom_bytes
    truncated: bool  # cut at dom_bytes, or read before the page loaded (not merely before it settled)
    hidden_removed: int  # characters the browser's computed style hides
    egress: EgressLog
    peak_memory_bytes: int
    refused_in_browser: list[str] = field(default_factory=list)  # "navigation", "scheme", "popup"
    seconds: float = 0.0
    screenshot: bytes | None = None  # PNG of what the browser showed (jobs/render/screenshot.py)


class PageRenderer:
    """Renders documents; one per render worker, a browser per call (launched ahead or for it)."""

    def __init__(
        self,
        playwright: Playwright,
        launcher: BrowserLauncher,
        policy: AddressPolicy,
        resolver: AbstractResolver | None = None,
        browsers: Browsers | None = None,
        quiet_s: float = QUIET_S,
    ) -> None:
        self._policy = policy
        self._quiet_s = quiet_s  # the settle rule's quiet window (RESEARCH_RENDER_QUIET_S)
        self._resolver = resolver
        # The browsers launched ahead (jobs/render/pool.py), or one launched per render.
        self._browsers = browsers or Browsers(playwright, launcher, policy, resolver)

    async def render(
        self, url: str, body: bytes, content_type: str, bounds: RenderBounds, seconds: float
    ) -> Rendered:
        """Raise Timeout when the page did not let itself be read in time, UnsupportedContentType
        when it needed more memory than a render may have (its renderer crashed or was killed)."""
        started = time.monotonic()
        # The page's own time ends early enough to read it and close its browser before ``seconds``:
        # a read that ends on time is never lost to the hard bound around the close.
        read_reserve, close_reserve = reserves(seconds)
        deadline = asyncio.get_running_loop().time() + seconds - close_reserve
        egress = EgressBounds(bounds.max_requests, bounds.max_bytes, bounds.ports)
        limits = Limits(seconds, bounds.memory_bytes)
        watch = Watch()
        refused: list[str] = []
        try:
            async with asyncio.timeout(seconds):
                async with self._browsers.browser(egress, limits, watch) as held:
                    context = held.context
                    context.on("page", lambda popup: _close_popup(popup, refused))
                    page = context.pages[0] if context.pages else await context.new_page()
                    page.on("crash", lambda _: refused.append("crash"))
                    moves = Navigations(self._policy, self._resolver, bounds.ports)
                    page.on("load", lambda _: moves.on_load())
                    settle = Settle(page, self._quiet_s)
                    router = _Router(page, body, content_type, refused, held.asked, moves)
                    await page.route("**/*", router.handle)
                    await page.route_web_socket("**/*", router.handle_web_socket)
                    html, hidden, cut, settled, shot = await self._load_and_read(
                        page, url, bounds, deadline, moves, settle, read_reserve
                    )
                egress_log = held.proxy.log  # its final counts, once the browser is gone
        except TimeoutError:
            raise Timeout(f"the page did not finish rendering within {seconds:.0f} s") from None
        except ResearchError:
            raise
        except Exception as exc:
            # The browser or its renderer died under the page (a crash, the memory watchdog, the
            # CPU limit): said in our words, never the browser's message.
            if watch.killed_for_memory or "crash" in refused:
                # V8's heap cap (a quarter of the bound) crashes the renderer of a page that
                # allocates without end, usually before the watchdog has to kill the tree.
                raise UnsupportedContentType(
                    f"the page needed more than {bounds.memory_bytes // 2**20} MiB to render, "
                    "or crashed its renderer"
                ) from None
            if asyncio.get_running_loop().time() >= deadline - LATE_S:
                # Playwright's own waits (the launch's included) end with its error, not ours.
                raise Timeout(f"the page did not finish rendering within {seconds:.0f} s") from None
            raise UnsupportedContentType(
                f"the page's renderer stopped before it could be read ({type(exc).__name__})"
            ) from None
        if watch.killed_for_memory:
            raise UnsupportedContentType(
                f"the page needed more than {bounds.memory_bytes // 2**20} MiB to render"
            )
        encoded = html.encode("utf-8", "replace")
        if len(encoded) > bounds.dom_bytes:
            encoded, cut = encoded[: bounds.dom_bytes], True
        return Rendered(
            html=encoded,
            truncated=cut or not settled,
            hidden_removed=hidden,
            egress=egress_log,
            peak_memory_bytes=watch.peak_bytes,
            refused_in_browser=refused,
            seconds=time.monotonic() - started,
            screenshot=shot,
        )

    async def _load_and_read(
        self,
        page: Page,
        url: str,
        bounds: RenderBounds,
        deadline: float,
        moves: Navigations,
        settle: Settle,
        read_reserve: float,
    ) -> tuple[str, int, bool, bool, bytes | None]:
        """Load, wait until settled, read while the screenshot is taken; every wait within what is
        left before ``deadline`` (loop time), keeping ``read_reserve`` for the read. A navigation
        the page makes of itself is followed and the page read where it ends (a read its
        navigation interrupted is made again there)."""
        loop = asyncio.get_running_loop()

        def left(keep: float) -> float:
            return max(0.2, deadline - loop.time() - keep)

        committed, waited_refresh = True, False
        try:
            # To its commit only: Playwright's wait for "load" would outlast a load that a
            # refused navigation (answered 204) left it unsure of; the page's own load events
            # are counted instead (``moves``).
            await page.goto(url, wait_until="commit", timeout=left(read_reserve) * 1000)
        except Exception:
            committed = False  # a crashed renderer fails the read below
        for _ in range(MAX_NAVIGATIONS + 2 + MAX_REREADS):
            settled = committed
            if committed and moves.pending:
                settled = await moves.until_loaded(left(read_reserve))
            if not settled:
                # A page that never finishes loading is read as far as it got; one that stayed
                # after a refused navigation once its document is parsed and quiet a moment.
                if committed and moves.refused:
                    # Playwright's own load states stay unsure after a refused navigation: the
                    # document's readiness is asked instead.
                    settled = await _until_parsed(page, left(read_reserve))
                    await asyncio.sleep(min(REFUSED_QUIET_S, left(read_reserve)))
                else:
                    with contextlib.suppress(Exception):  # at least the document, if time allows
                        await page.wait_for_load_state("domcontentloaded", timeout=left(0.5) * 1000)
            else:
                # The requests its scripts start after load (the app's data) and what they write:
                # until neither for the quiet window, or the bound (settle.py).
                await settle.until_settled(min(QUIET_MAX_S, left(read_reserve)))
                if not moves.pending and not waited_refresh:
                    waited_refresh = True
                    await _wait_for_refresh(page, moves, left(read_reserve + READ_S))
                if moves.pending:
                    continue  # it navigated again while quiet: read the page it went to
            # Beside the read, which leaves the page as it is (it serializes a copy).
            shooting = asyncio.ensure_future(screenshot.take(page, left(LATE_S)))
            # A page whose scripts hold its main thread forever never answers: the read has its own bound.
            try:
                html, hidden, cut = await asyncio.wait_for(
                    page.evaluate(READ_DOM, bounds.dom_bytes), min(READ_S, left(0.1))
                )
                shot = await shooting
            except TimeoutError:
                raise Timeout(
                    "the page's scripts did not let it be read (its main thread stayed busy)"
                ) from None
            except Exception:
                if not moves.followed or loop.time() >= deadline - read_reserve:
                    raise
                continue  # the page left under the read (a navigation): read where it went
            finally:
                shooting.cancel()  # when the read failed: a picture of nothing read is not kept
            if page.url.startswith("chrome-error:"):
                raise UnsupportedContentType(
                    f"the page navigated itself to {moves.followed[-1]}, which could not be loaded"
                )
            return str(html), int(hidden), bool(cut), settled, shot
        raise Timeout("the page kept navigating itself and could not be read")


async def _until_parsed(page: Page, seconds: float) -> bool:
    """Until the document is parsed (its readyState past "loading"), or ``seconds``; whether it was."""
    end = asyncio.get_running_loop().time() + seconds
    while asyncio.get_running_loop().time() < end:
        with contextlib.suppress(Exception):
            state = await asyncio.wait_for(page.evaluate("document.readyState"), 1.0)
            if state != "loading":
                return True
        await asyncio.sleep(0.1)
    return False


async def _wait_for_refresh(page: Page, moves: Navigations, seconds: float) -> None:
    """A meta refresh due soon after load: wait until it is due (and its page loading)."""
    with contextlib.suppress(Exception):
        delay = await asyncio.wait_for(page.evaluate(REFRESH_DELAY), 1.0)
        if isinstance(delay, int | float) and 0 < delay <= REFRESH_WAIT_S:
            await asyncio.sleep(min(float(delay) + 0.3, seconds))


class _Router:
    """The browser-side rules for every request the page makes, before the proxy sees it."""

    def __init__(
        self,
        page: Page,
        body: bytes,
        content_type: str,
        refused: list[str],
        asked: set[tuple[str, int]],
        moves: Navigations,
    ) -> None:
        self._page = page
        self._moves = moves
        self._asked = asked
        self._body = body
        self._content_type = content_type
        self._refused = refused
        self._served = False

    async def handle(self, route: Route, request: Request) -> None:
        with contextlib.suppress(Exception):  # the page may be gone; nothing to answer then
            if request.is_navigation_request() and request.frame == self._page.main_frame:
                if not self._served:  # the navigation render() started, to the fetched URL
                    self._served = True
                    await route.fulfill(
                        status=200, headers={"content-type": self._content_type}, body=self._body
                    )
                    return
                if await self._moves.admit(request.url, request.method, self._page.url) and self._ask(
                    request.url
                ):
                    await route.continue_()  # through the proxy, which judges its tunnel again
                    return
                # Answered "204 No Content": the browser keeps the page it has. (An aborted
                # navigation would replace it with an error page.)
                self._refused.append("navigation")
                self._moves.on_refused()
                await route.fulfill(status=204, body=b"")
                return
            if not self._ask(request.url):
                await route.abort("blockedbyclient")
                return
            await route.continue_()

    async def handle_web_socket(self, socket: WebSocketRoute) -> None:
        with contextlib.suppress(Exception):
            if socket.url.startswith("wss:") and self._ask("https:" + socket.url[4:]):
                socket.connect_to_server()
                return
            if not socket.url.startswith("wss:"):
                self._refused.append("scheme")
            await socket.close(code=1008, reason="refused")

    def _ask(self, url: str) -> bool:
        """Admit the request's host to the proxy, if the URL is one a fetch could ask for."""
        if not url.startswith(HTTPS):
            self._refused.append("scheme")
            return False
        try:
            target = parse_https_url(url)
        except GuardianRefusal:
            self._refused.append("url")
            return False
        self._asked.add((target.host, target.port))
        return True


def _close_popup(popup: Page, refused: list[str]) -> None:
    refused.append("popup")
    asyncio.get_running_loop().create_task(_quietly_close(popup))


async def _quietly_close(popup: Page) -> None:
    with contextlib.suppress(Exception):
        await popup.close()
