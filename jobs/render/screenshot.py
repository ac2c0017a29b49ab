"""The screenshot of a rendered page, for the evidence archive: what the browser showed, bounded.

Taken once the page settled, beside the DOM's read (which leaves the live page as it is: it
serializes a copy, visible.py), so the picture is of the page as the reader read it. Bounded in
pixels (the viewport's width, at most ``MAX_HEIGHT`` of the page's height, at CSS scale: a clip of
that area, captured in one piece, no scrolling) and in bytes (``MAX_BYTES``: a larger picture is
encoded again at full compression, then taken of the first screen alone, and when that is still
larger there is no screenshot). Asked of the browser directly (``Page.captureScreenshot``, with
its fast PNG encoding first): Playwright's screenshot adds round trips to the page (fonts,
animations, the caret, the page's size) that a picture for the record does not need. A
screenshot that fails or runs out of time costs the render nothing: the page is still read.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.async_api import Page

MAX_HEIGHT = 2400  # CSS pixels of the page, from its top
MAX_BYTES = 2 * 1024 * 1024
MAX_S = 3.0
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PAGE_HEIGHT = "() => Math.max(document.documentElement.scrollHeight, document.body?.scrollHeight ?? 0)"


async def take(page: Page, seconds: float) -> bytes | None:
    """A PNG of the page's top, within the bounds; None when it cannot be had in ``seconds``."""
    seconds = min(MAX_S, seconds)
    if seconds <= 0.1:
        return None
    # One bound for all of it: a page whose scripts hold its main thread answers nothing.
    with contextlib.suppress(Exception):
        async with asyncio.timeout(seconds):
            return await _take(page)
    return None


async def _take(page: Page) -> bytes | None:
    size = page.viewport_size or {"width": 1280, "height": 720}
    session, height = await asyncio.gather(page.context.new_cdp_session(page), page.evaluate(PAGE_HEIGHT))
    tall = max(1, min(MAX_HEIGHT, int(height) if isinstance(height, int | float) else 0))
    # The whole bounded area, fast-encoded; then at full compression; then the first screen.
    for clip_height, fast in ((tall, True), (tall, False), (min(tall, size["height"]), False)):
        shot = await session.send(
            "Page.captureScreenshot",
            {
                "format": "png",
                "clip": {"x": 0, "y": 0, "width": size["width"], "height": clip_height, "scale": 1},
                "captureBeyondViewport": clip_height > size["height"],
                "optimizeForSpeed": fast,
            },
        )
        png = base64.b64decode(shot["data"])
        if png.startswith(PNG_SIGNATURE) and len(png) <= MAX_BYTES:
            return png
    return None
