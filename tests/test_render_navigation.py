"""A page that navigates itself while it loads is read where it went, within the deadline: each
navigation judged before it is made, at most a bounded number followed, a cross-site POST never.

The pages are served from a local TLS site; each destination says which one it is, so the text
read tells where the render ended. The deadline is the production one (26 s): a render that held it
would come back truncated, which each test rules out.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
import pytest_asyncio
from aiohttp import web
from playwright.async_api import Playwright

from jobs.render.navigation import MAX_NAVIGATIONS
from jobs.render.page import PageRenderer, Rendered
from tests.support.hostile_render import resolver
from tests.support.rendering import bounds, driver, needs_chromium, renderer
from tests.support.tls import TestCA, serve

pytestmark = needs_chromium

DEADLINE_S = 26.0
ARRIVED = "You arrived at the destination page."
ORIGIN = "The page that sends you elsewhere."


@dataclass
class Site:
    pages: PageRenderer
    port: int
    requests: list[str] = field(default_factory=list)

    @property
    def origin(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    async def render(self, body: str) -> Rendered:
        return await self.pages.render(
            f"{self.origin}/page", body.encode(), "text/html; charset=utf-8", bounds(self.port), DEADLINE_S
        )


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def playwright() -> AsyncIterator[Playwright]:
    async with driver() as running:
        yield running


@pytest_asyncio.fixture(loop_scope="module")
async def site(ca: TestCA, playwright: Playwright) -> AsyncIterator[Site]:
    seen: list[str] = []

    async def answer(request: web.Request) -> web.Response:
        seen.append(f"{request.method} {request.path_qs}")
        if request.path.startswith("/hop/"):  # a chain that never ends: /hop/1 -> /hop/2 -> ...
            n = int(request.path.rsplit("/", 1)[1])
            return web.Response(
                text=f"<p>Hop {n}.</p><script>location.href='/hop/{n + 1}'</script>", content_type="text/html"
            )
        if request.path == "/dest":
            return web.Response(text=f"<h1>Destination</h1><p>{ARRIVED}</p>", content_type="text/html")
        return web.Response(status=404)

    async with serve({"/{tail:.*}": answer}, ca.server_context()) as server:
        made = Site(renderer(playwright, ca, resolver()), server.port)
        made.requests = seen
        yield made


def origin_page(script_or_head: str, head: bool = False) -> str:
    inner = (
        "<head>" + script_or_head + "</head><body>" if head else "<head></head><body>"
    ) + f"<p>{ORIGIN}</p>"
    return "<!doctype html><html>" + inner + ("" if head else script_or_head) + "</body></html>"


SELF_NAVIGATIONS = {
    "location-href": origin_page("<script>location.href = '/dest'</script>"),
    "location-href-after-load": origin_page(
        "<script>addEventListener('load', () => setTimeout(() => { location.href = '/dest' }, 200))</script>"
    ),
    "location-replace": origin_page("<script>location.replace('/dest')</script>"),
    "location-assign-absolute": origin_page("<script>location.assign(location.origin + '/dest')</script>"),
    "meta-refresh": origin_page('<meta http-equiv="refresh" content="0;url=/dest">', head=True),
    "meta-refresh-delayed": origin_page('<meta http-equiv="refresh" content="1; url=/dest">', head=True),
    "form-submit-get": origin_page(
        "<form id=f action=/dest><input name=q value=1></form>"
        "<script>document.getElementById('f').submit()</script>"
    ),
    "form-submit-post-same-site": origin_page(
        "<form id=f method=post action=/dest><input name=q value=1></form>"
        "<script>document.getElementById('f').submit()</script>"
    ),
}


@pytest.mark.parametrize("how", sorted(SELF_NAVIGATIONS))
async def test_a_page_that_navigates_itself_is_read_at_its_destination_within_the_deadline(
    site: Site, how: str
) -> None:
    rendered = await site.render(SELF_NAVIGATIONS[how])
    html = rendered.html.decode()
    assert ARRIVED in html, f"{how}: not read at its destination"
    assert ORIGIN not in html
    assert not rendered.truncated
    assert any(line.endswith("/dest") or "/dest?" in line for line in site.requests)
    assert rendered.seconds < DEADLINE_S


async def test_a_navigation_to_a_refused_address_is_not_made_and_the_page_stays(site: Site) -> None:
    rendered = await site.render(
        origin_page(f"<script>location.href = 'https://127.0.0.2:{site.port}/x'</script>")
    )
    assert ORIGIN in rendered.html.decode()
    assert "navigation" in rendered.refused_in_browser
    assert not rendered.truncated
    assert all(c == f"127.0.0.1:{site.port}" for c in rendered.egress.connected)
    assert not rendered.truncated  # read once parsed, not held to the deadline and cut


async def test_a_form_post_to_another_site_is_not_sent(site: Site) -> None:
    # site.test resolves to 127.0.0.1 (allowed): only the cross-site rule can stop it.
    other = f"https://site.test:{site.port}/dest"
    page = origin_page(
        f"<form id=f method=post action={other!r}><input name=q value=1></form>"
        "<script>document.getElementById('f').submit()</script>"
    )
    rendered = await site.render(page)
    assert ORIGIN in rendered.html.decode()
    assert not any(line.startswith("POST") for line in site.requests)
    assert not rendered.truncated


async def test_a_page_that_keeps_navigating_is_followed_a_bounded_number_of_times(site: Site) -> None:
    rendered = await site.render(origin_page("<script>location.href = '/hop/1'</script>"))
    hops = [line for line in site.requests if line.startswith("GET /hop/")]
    assert len(hops) == MAX_NAVIGATIONS
    assert f"Hop {MAX_NAVIGATIONS}." in rendered.html.decode()
    assert "navigation" in rendered.refused_in_browser
