"""What a rendered page's stylesheets hide is dropped and counted; what they merely style is kept.

Each family is one page (tests/support/hidden_render.py) rendered once in real headless chromium;
each technique is its own test over that render. The oracle is the page's own phrases: which ones
appear in the serialized DOM, and ``hidden_removed`` against their characters counted here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from playwright.async_api import Playwright

from jobs.reader.document import build_document
from jobs.render.browser import BrowserLauncher, Limits, Watch
from jobs.render.page import Rendered
from jobs.render.pool import Browsers
from jobs.render.visible import READ_DOM
from tests.support.hidden_render import HIDDEN, SHOWN, VISIBLE, chars, page, phrases
from tests.support.hostile_render import resolver
from tests.support.rendering import CHROMIUM, POLICY, bounds, driver, needs_chromium, renderer
from tests.support.tls import TestCA
from worker.guardian.egress_proxy import EgressBounds

pytestmark = needs_chromium


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def playwright() -> AsyncIterator[Playwright]:
    async with driver() as running:
        yield running


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def rendered(ca: TestCA, playwright: Playwright) -> AsyncIterator[dict[str, Rendered]]:
    """Each family's page, rendered once."""
    # The pages ask for nothing: the renderer serves the document itself, no site is needed.
    pages = renderer(playwright, ca, resolver())
    out = {}
    for name, family in (("hidden", HIDDEN), ("visible", VISIBLE)):
        out[name] = await pages.render(
            "https://site.test/page", page(family).encode(), "text/html; charset=utf-8", bounds(443), 20.0
        )
    yield out


@pytest.mark.parametrize("technique", sorted(HIDDEN))
async def test_text_hidden_by_each_stylesheet_technique_is_dropped(
    rendered: dict[str, Rendered], technique: str
) -> None:
    html = rendered["hidden"].html.decode()
    assert SHOWN in html  # the page itself was read
    for phrase in phrases(HIDDEN[technique][1]):
        assert phrase not in html, f"{technique}: {phrase!r} reached the reader"


async def test_hidden_removed_counts_exactly_the_hidden_characters(rendered: dict[str, Rendered]) -> None:
    expected = sum(chars(phrase) for _, markup in HIDDEN.values() for phrase in phrases(markup))
    assert rendered["hidden"].hidden_removed == expected


@pytest.mark.parametrize("styling", sorted(VISIBLE))
async def test_text_a_reader_sees_survives_however_it_is_styled(
    rendered: dict[str, Rendered], styling: str
) -> None:
    html = rendered["visible"].html.decode()
    for phrase in phrases(VISIBLE[styling][1]):
        assert phrase in html, f"{styling}: visible {phrase!r} was dropped"


async def test_a_page_of_visible_styling_counts_nothing_hidden(rendered: dict[str, Rendered]) -> None:
    assert rendered["visible"].hidden_removed == 0


async def test_the_reader_of_the_rendered_page_gets_none_of_the_hidden_text(
    rendered: dict[str, Rendered],
) -> None:
    document = await build_document(
        rendered["hidden"].html,
        "text/html; charset=utf-8",
        "https://site.test/page",
        extract="full",
        max_chars=40_000,
        cpu_budget_s=3.0,
        body_truncated=False,
    )
    assert SHOWN in document.text
    assert "secret" not in document.text.lower()


async def test_the_read_leaves_the_page_itself_as_it_was(ca: TestCA, playwright: Playwright) -> None:
    """The screenshot is taken while the DOM is read: the read drops the hidden text from a copy."""
    assert CHROMIUM is not None
    browsers = Browsers(playwright, BrowserLauncher(CHROMIUM, str(ca.bundle)), POLICY, resolver())
    limits = EgressBounds(max_requests=0, max_bytes=0, ports=frozenset())
    async with browsers.browser(limits, Limits(20.0, 2**30), Watch()) as held:
        live = held.context.pages[0]
        await live.set_content(page(HIDDEN))  # about:blank's content: nothing is fetched
        before = await live.evaluate("document.documentElement.outerHTML")
        html, hidden, _ = await live.evaluate(READ_DOM, 2_000_000)
        after = await live.evaluate("document.documentElement.outerHTML")
    await browsers.stop()
    secrets = [phrase for _, markup in HIDDEN.values() for phrase in phrases(markup)]
    assert all(secret in before for secret in secrets)  # the page had them
    assert not any(secret in html for secret in secrets) and SHOWN in html  # the read dropped them
    assert hidden == sum(chars(secret) for secret in secrets)
    assert after == before  # and the page still has every one
