"""When a rendered page is read (jobs/render/settle.py): once it loaded, no request of it was in
flight and its DOM did not change for the quiet window; bounded, so a page that never goes quiet
is read as it is.

The pages are served by a local TLS site whose ``/slow`` answers 300 ms late; each text a page
writes late says how it came, so the HTML read tells which waits the render made.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest_asyncio
from aiohttp import web
from playwright.async_api import Playwright

from jobs.render.page import PageRenderer, Rendered
from jobs.render.settle import QUIET_S
from tests.support.hostile_render import resolver
from tests.support.rendering import bounds, driver, needs_chromium, renderer
from tests.support.tls import TestCA, serve

pytestmark = needs_chromium

DEADLINE_S = 26.0
SLOW_S = 0.3
SLOW_TEXT = "The filing arrived from the API after the page had loaded."
TIMER_TEXT = "A timer wrote this after the page had loaded."
# The timer and polling pages' window: wider than the default, so a renderer starved by a loaded
# machine (its timers fire late) cannot outrun it; what is proven is the rule, the same at any window.
TIMER_QUIET_S = 0.4


@dataclass
class Site:
    playwright: Playwright
    ca: TestCA
    port: int
    requests: list[str] = field(default_factory=list)

    async def render(self, body: str, quiet_s: float = QUIET_S) -> Rendered:
        pages: PageRenderer = renderer(self.playwright, self.ca, resolver(), quiet_s)
        return await pages.render(
            f"https://127.0.0.1:{self.port}/page",
            body.encode(),
            "text/html; charset=utf-8",
            bounds(self.port),
            DEADLINE_S,
        )


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def playwright() -> AsyncIterator[Playwright]:
    async with driver() as running:
        yield running


@pytest_asyncio.fixture(loop_scope="module")
async def site(ca: TestCA, playwright: Playwright) -> AsyncIterator[Site]:
    seen: list[str] = []

    async def answer(request: web.Request) -> web.Response:
        seen.append(request.path)
        if request.path == "/slow":
            await asyncio.sleep(SLOW_S)
            return web.Response(text=SLOW_TEXT)
        if request.path == "/poll":
            return web.Response(text=f"tick {len(seen)}")
        return web.Response(status=404)

    async with serve({"/{tail:.*}": answer}, ca.server_context()) as server:
        yield Site(playwright, ca, server.port, seen)


def page(script: str) -> str:
    body = f"<h1>Settle</h1><div id=out></div><script>{script}</script>"
    return f"<!doctype html><html><body>{body}</body></html>"


WRITE = (
    "const write = (t) => { const p = document.createElement('p'); p.textContent = t; out.appendChild(p); };"
)
AFTER_LOAD = {
    "fetch": "fetch('/slow').then((r) => r.text()).then(write);",
    "xhr": (
        "const x = new XMLHttpRequest(); x.open('GET', '/slow');"
        "x.onload = () => write(x.responseText); x.send();"
    ),
}


async def test_text_a_fetch_or_xhr_brings_after_the_load_is_read(site: Site) -> None:
    for how, call in AFTER_LOAD.items():
        rendered = await site.render(page(WRITE + f"addEventListener('load', () => {{ {call} }});"))
        assert SLOW_TEXT in rendered.html.decode(), f"{how}: read before its answer arrived"
        assert not rendered.truncated
    assert site.requests.count("/slow") == len(AFTER_LOAD)


async def test_text_a_timer_writes_within_the_quiet_window_is_read(site: Site) -> None:
    # Written in two halves: the text whole is in the DOM only if the timer ran before the read.
    half = len(TIMER_TEXT) // 2
    written = f"{TIMER_TEXT[:half]!r} + {TIMER_TEXT[half:]!r}"
    script = WRITE + f"addEventListener('load', () => setTimeout(() => write({written}), 250));"
    rendered = await site.render(page(script), TIMER_QUIET_S)
    assert TIMER_TEXT in rendered.html.decode()
    assert site.requests == []  # no request: only the quiet window held the read


async def test_a_dom_that_keeps_changing_holds_the_read_until_it_stops(site: Site) -> None:
    # Five writes 150 ms apart: each within the window of the one before, together almost twice
    # as long as the window; read at the window after load, the page would show two of them.
    script = WRITE + (
        "let n = 0; const step = () => { write('step ' + (++n)); if (n < 5) setTimeout(step, 150); };"
        "addEventListener('load', () => setTimeout(step, 150));"
    )
    rendered = await site.render(page(script), TIMER_QUIET_S)
    assert "step 5" in rendered.html.decode()
    assert site.requests == []


async def test_a_page_that_never_goes_quiet_is_read_as_it_is_by_the_deadline(site: Site) -> None:
    script = WRITE + (
        "const poll = () => fetch('/poll').then((r) => r.text()).then(write);"
        "addEventListener('load', () => setInterval(poll, 100));"
    )
    # The wider window too: a poll a starved renderer made late must not pass for the page settling.
    rendered = await site.render(page(script), TIMER_QUIET_S)  # a Timeout if it outlasted the deadline
    html = rendered.html.decode()
    assert "tick" in html
    assert site.requests.count("/poll") >= 2  # it was still polling when it was read
    assert not rendered.truncated  # loaded: what it has is the page
