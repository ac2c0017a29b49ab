"""One render: the document the guarded fetch read, run in a fresh browser whose only way out is
its own egress proxy, then read back as HTML with what its stylesheets hide taken out.

The document itself is not fetched by the browser: the fetcher already read it through the
guardian, the URL menu and the fetch's redirect rules (every hop judged), and the browser is handed
those bytes for the final URL. Everything the page then asks for goes through the browser's route
table here, then the proxy:

- a second navigation of the page itself (meta refresh, ``location = ...``, a form POST, a link)
  is refused: the page read is the one the fetch judged, not one its scripts chose;
- any request that is not https (``http:``, ``ws:``, ``ftp:``, ``file:``, ``chrome:``) is refused
  before it is made; the proxy would refuse it as well;
- popups are closed as they open (``--block-new-web-contents`` stops most before that);
- the rest (subresources, frames, XHR and fetch, EventSource, WebSocket) is a CONNECT tunnel the
  proxy judges: resolved and pinned like a fetch, 443-style ports, TLS only, counted; the proxy
  opens tunnels only to hosts the page's own requests named here, so the browser's background
  traffic (sign-in, updates), which no flag quite silences, goes nowhere.

The page gets until its ``load`` (bounded), then a short quiet period for the requests its scripts
start, then its DOM is read: elements whose computed style is ``display: none`` and text whose
computed visibility is not ``visible`` are removed and their characters counted, and the HTML is
serialized, cut at the byte cap.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from jobs.render import screenshot
from jobs.render.browser import BrowserLauncher, Limits, Watch
from jobs.render.pool import Browsers
from worker.errors import GuardianRefusal, ResearchError, Timeout, UnsupportedContentType
from worker.guardian.egress_proxy import EgressBounds, EgressLog
from worker.guardian.urls import parse_https_url

if TYPE_CHECKING:
    from aiohttp.abc import AbstractResolver
    from playwright.async_api import Page, Playwright, Request, Route, WebSocketRoute

    from worker.guardian.policy import AddressPolicy

# Of the render's wall clock: what is kept back from the load for the read; the longest wait
# after load for its scripts' requests; the bound on reading the DOM back.
READ_RESERVE_S = 1.5
LATE_S = 0.5  # an error this close to the deadline is the deadline's
QUIET_MAX_S = 2.0
READ_S = 3.0
HTTPS = "https:"
# Ours, run in the page once it settled: drop what the computed style hides (counting its
# characters), then serialize, cut at the cap in characters (the bytes are cut again after).
READ_DOM = """
(cap) => {
  const skip = new Set(["SCRIPT", "STYLE", "NOSCRIPT", "TEMPLATE", "HEAD", "TITLE", "META", "LINK", "BASE"]);
  let hidden = 0;
  const drop = [];
  const walk = (element) => {
    for (const child of Array.from(element.children)) {
      if (skip.has(child.tagName)) continue;
      if (getComputedStyle(child).display === "none") {
        hidden += (child.textContent || "").replace(/\\s+/g, "").length;
        drop.push(child);
        continue;
      }
      walk(child);
    }
  };
  if (document.body) walk(document.body);
  for (const element of drop) element.remove();
  if (document.body) {
    const texts = [];
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) texts.push(walker.currentNode);
    for (const text of texts) {
      const parent = text.parentElement;
      if (!parent || skip.has(parent.tagName)) continue;
      if (getComputedStyle(parent).visibility !== "visible") {
        hidden += text.data.replace(/\\s+/g, "").length;
        text.remove();
      }
    }
  }
  const doctype = document.doctype ? "<!DOCTYPE html>" : "";
  const html = doctype + document.documentElement.outerHTML;
  return [html.length > cap ? html.slice(0, cap) : html, hidden, html.length > cap];
}
"""


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
    truncated: bool  # cut at dom_bytes, or read before the page settled its requests
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
    ) -> None:
        # The browsers launched ahead (jobs/render/pool.py), or one launched per render.
        self._browsers = browsers or Browsers(playwright, launcher, policy, resolver)

    async def render(
        self, url: str, body: bytes, content_type: str, bounds: RenderBounds, seconds: float
    ) -> Rendered:
        """Raise Timeout when the page did not let itself be read in time, UnsupportedContentType
        when it needed more memory than a render may have (its renderer crashed or was killed)."""
        started = time.monotonic()
        deadline = asyncio.get_running_loop().time() + seconds
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
                    router = _Router(page, body, content_type, refused, held.asked)
                    await page.route("**/*", router.handle)
                    await page.route_web_socket("**/*", router.handle_web_socket)
                    html, hidden, cut, settled, shot = await self._load_and_read(page, url, bounds, deadline)
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
        self, page: Page, url: str, bounds: RenderBounds, deadline: float
    ) -> tuple[str, int, bool, bool, bytes | None]:
        """Load, wait for quiet, take the screenshot, read; every wait within what is left before
        ``deadline`` (loop time), keeping enough for the read."""
        loop = asyncio.get_running_loop()

        def left(keep: float) -> float:
            return max(0.2, deadline - loop.time() - keep)

        settled = True
        try:
            await page.goto(url, wait_until="load", timeout=left(READ_RESERVE_S) * 1000)
        except Exception:
            # A page that never finishes loading is read as far as it got; a crashed one fails
            # the read below.
            settled = False
            with contextlib.suppress(Exception):  # at least the document itself, if time allows
                await page.wait_for_load_state("domcontentloaded", timeout=left(0.5) * 1000)
        if settled:
            # The requests its scripts start after load (the app's data): until none was in
            # flight for 500 ms, or the bound.
            with contextlib.suppress(Exception):
                await page.wait_for_load_state(
                    "networkidle", timeout=min(QUIET_MAX_S, left(READ_RESERVE_S)) * 1000
                )
        shot = await screenshot.take(page, left(READ_RESERVE_S) - 0.2)
        # A page whose scripts hold its main thread forever never answers: the read has its own bound.
        try:
            html, hidden, cut = await asyncio.wait_for(
                page.evaluate(READ_DOM, bounds.dom_bytes), min(READ_S, left(0.1))
            )
        except TimeoutError:
            raise Timeout("the page's scripts did not let it be read (its main thread stayed busy)") from None
        return str(html), int(hidden), bool(cut), settled, shot


class _Router:
    """The browser-side rules for every request the page makes, before the proxy sees it."""

    def __init__(
        self, page: Page, body: bytes, content_type: str, refused: list[str], asked: set[tuple[str, int]]
    ) -> None:
        self._page = page
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
                # Answered "204 No Content": the browser keeps the page it has. (An aborted
                # navigation would replace it with an error page.)
                self._refused.append("navigation")
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
