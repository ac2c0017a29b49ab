"""The hostile-page suite: pages that try to reach 127.0.0.2 (and an http server) by every channel
a browser has, rendered through the guardian's egress proxy. Nothing may reach a trap, ever; each
page must still have run (its own script wrote ``RAN``), so a page blocked whole cannot pass.

The default run renders each channel's page once; ``chaos`` adds the long and the repeated ones.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from playwright.async_api import Playwright

from jobs.render.page import PageRenderer, Rendered
from tests.support.hostile_render import RAN, Traps, channels, hostile_world, resolver
from tests.support.rendering import bounds, driver, measured_pace_s, needs_chromium, renderer, scaled_s
from tests.support.tls import TestCA

pytestmark = needs_chromium


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def playwright() -> AsyncIterator[Playwright]:
    async with driver() as running:
        yield running


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def pace_s(ca: TestCA, playwright: Playwright) -> float:
    async with hostile_world(ca) as traps:
        return await measured_pace_s(renderer(playwright, ca, resolver()), traps.site, traps.site_port)


@pytest_asyncio.fixture(loop_scope="module")
async def world(ca: TestCA, playwright: Playwright, pace_s: float) -> AsyncIterator[Traps]:
    async with hostile_world(ca) as traps:
        traps.pace_s = pace_s
        traps.render = functools.partial(_render, renderer(playwright, ca, resolver()), traps)
        yield traps


GENEROUS_S = 180.0


async def _render(
    pages: PageRenderer, traps: Traps, body: str, seconds: float = 8.0, **limits: int
) -> Rendered:
    """``seconds`` is what the render needs on a quiet machine; it is given that and the pace's share."""
    return await pages.render(
        f"{traps.site}/page",
        body.encode(),
        "text/html; charset=utf-8",
        bounds(traps.site_port, **limits),
        # What this suite asserts is where the page reached, never how fast: a deadline well past
        # any loaded machine's pace, so load alone cannot fail it (the pace is one sample).
        max(scaled_s(seconds, traps.pace_s), GENEROUS_S),
    )


CHANNELS = sorted(channels(Traps(0, 0)))


@pytest.mark.chaos
@pytest.mark.parametrize("channel", CHANNELS)
async def test_no_channel_of_a_hostile_page_reaches_a_refused_address_or_plain_http(
    ca: TestCA, world: Traps, channel: str
) -> None:
    rendered = await world.render(channels(world)[channel])
    assert world.reached == [], f"{channel} reached a trap: {world.reached}"
    assert RAN.encode() in rendered.html or channel in {"meta-refresh", "location", "form-post"}
    assert rendered.egress.connected == [] or all(
        c == f"127.0.0.1:{world.site_port}" for c in rendered.egress.connected
    )


async def test_every_channel_at_once_reaches_nothing_and_the_page_still_runs(
    ca: TestCA, world: Traps
) -> None:
    everything = "".join(
        body.split("<body>", 1)[1].split("</body>", 1)[0] for body in channels(world).values()
    )
    heads = "".join(body.split("<head>", 1)[1].split("</head>", 1)[0] for body in channels(world).values())
    rendered = await world.render(
        f"<!doctype html><html><head>{heads}</head><body>{everything}</body></html>"
    )
    assert world.reached == []
    assert RAN.encode() in rendered.html
    refused = " ".join(rendered.egress.refused)
    assert "127.0.0.2" in refused or "loopback" in refused
    assert "internal.test" in refused
