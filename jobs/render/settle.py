"""When a loaded page is settled enough to read: our rule, from the page's own requests and its DOM.

Every request a rendered page makes passes the render's route table (jobs/render/page.py), so
what is in flight is known here from the page's events, without Playwright's ``networkidle``
(which by its definition waits 500 ms with no connection at all). The page is settled when:

- its ``load`` event has fired,
- no request of it has been in flight for the quiet window (``RESEARCH_RENDER_QUIET_S``, 200 ms
  by default), counted from the load at the earliest: a request a script starts in that window
  (a timer after load, the app's data) holds the read until it has finished and the window has
  passed again;
- and no change to its DOM (nodes added or removed, text changed, a ``class`` or ``hidden``
  attribute set) happened during that window, as a ``MutationObserver`` put in the page at load
  reports: what the app writes once its data arrives is read.

The wait is bounded by the caller (the render's deadline less the read's reserve, and at most
2 s after load): a page that never goes quiet (it polls, streams, animates its text) is read as
it is at the bound. The page cannot make the wait longer than that bound; at most it can end it
early with a broken ``MutationObserver``, which leaves the rule to its requests.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.async_api import JSHandle, Page, Request

QUIET_S = 0.2  # the default quiet window (RESEARCH_RENDER_QUIET_S)
ASK_S = 1.0  # the longest one question to the page may take: a busy main thread answers nothing

# Ours, run in the page once it loaded: records when its DOM last changed (page time, ms).
WATCH_DOM = """
() => {
  const seen = { at: -1 };
  new MutationObserver(() => { seen.at = performance.now(); }).observe(document, {
    subtree: true, childList: true, characterData: true,
    attributes: true, attributeFilter: ["class", "hidden"],
  });
  return seen;
}
"""
# How long ago (ms) the DOM last changed, or -1 when it has not since it was watched.
DOM_AGE = "(seen) => seen.at < 0 ? -1 : performance.now() - seen.at"


class Settle:
    """One page's requests in flight and its loads, from its events; ``until_settled`` waits."""

    def __init__(self, page: Page, quiet_s: float = QUIET_S) -> None:
        self._page = page
        self._quiet_s = quiet_s
        self._loop = asyncio.get_running_loop()
        self._in_flight: set[Request] = set()
        self._changed_at = self._loop.time()  # the last request started or ended
        self._loaded_at: float | None = None
        self._loads = 0
        self._changed = asyncio.Event()
        page.on("request", self._started)
        page.on("requestfinished", self._ended)
        page.on("requestfailed", self._ended)
        page.on("load", self._loaded)

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def _started(self, request: Request) -> None:
        self._in_flight.add(request)
        self._change()

    def _ended(self, request: Request) -> None:
        self._in_flight.discard(request)
        self._change()

    def _loaded(self, _: Any) -> None:
        self._loads += 1
        self._loaded_at = self._loop.time()
        self._change()

    def _change(self) -> None:
        self._changed_at = self._loop.time()
        self._changed.set()

    async def _until_change(self, seconds: float) -> None:
        self._changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), max(0.0, seconds))

    async def until_settled(self, seconds: float) -> bool:
        """Wait until the page is settled (above), or ``seconds``; whether it was."""
        end = self._loop.time() + seconds
        watched: tuple[int, JSHandle] | None = None  # (the load it was put in at, the record)
        dom_at = 0.0  # when the DOM last changed, loop time
        dom_known = True  # false once the page broke the watcher: its requests alone then
        while True:
            now = self._loop.time()
            if now >= end:
                return False
            if self._loaded_at is None or self._in_flight:
                await self._until_change(end - now)
                continue
            if dom_known and (watched is None or watched[0] != self._loads):
                # The watcher is the document's: a page it navigated to needs its own.
                loads = self._loads
                handle = await self._ask(WATCH_DOM, None, end)
                if handle is None:
                    if self._loads == loads:
                        dom_known = False
                    continue
                watched, dom_at = (loads, handle), self._loop.time()
                continue
            quiet_from = max(self._loaded_at, self._changed_at, dom_at if dom_known else 0.0)
            if now < quiet_from + self._quiet_s:
                await self._until_change(min(quiet_from + self._quiet_s, end) - now)
                continue
            if not dom_known or watched is None:
                return True
            age = await self._ask(DOM_AGE, watched[1], end)
            if not isinstance(age, int | float):
                if self._loads == watched[0]:
                    dom_known = False  # not a navigation: the page broke the watcher
                continue
            if age < 0 or age >= self._quiet_s * 1000:
                return True
            dom_at = self._loop.time() - age / 1000

    async def _ask(self, script: str, argument: JSHandle | None, end: float) -> Any:
        """The page's answer, or None (no time left, a busy main thread, a page gone or navigated)."""
        seconds = min(ASK_S, end - self._loop.time())
        if seconds <= 0:
            return None
        try:
            if argument is None:
                return await asyncio.wait_for(self._page.evaluate_handle(script), seconds)
            return await asyncio.wait_for(self._page.evaluate(script, argument), seconds)
        except Exception:
            return None
