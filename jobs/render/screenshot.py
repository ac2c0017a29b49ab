"""The screenshot of a rendered page, for the evidence archive: what the browser showed, bounded.

Taken after the page settled and before its DOM is read back (the read removes what the style
hides, which changes nothing visible, but the picture is of the page as it was). Bounded in pixels
(the viewport's width, at most ``MAX_HEIGHT`` of the page's height, at CSS scale) and in bytes
(``MAX_BYTES``: a larger picture is taken again of the first screen alone, and when that is still
larger there is no screenshot). A screenshot that fails or runs out of time costs the render
nothing: the page is still read.
"""

from __future__ import annotations

import asyncio
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
            return await _take(page, seconds)
    return None


async def _take(page: Page, seconds: float) -> bytes | None:
    size = page.viewport_size or {"width": 1280, "height": 720}
    height = await page.evaluate(PAGE_HEIGHT)
    tall = max(1, min(MAX_HEIGHT, int(height) if isinstance(height, int | float) else 0))
    for clip_height in (tall, min(tall, size["height"])):
        png = await page.screenshot(
            type="png",
            full_page=True,
            clip={"x": 0, "y": 0, "width": size["width"], "height": clip_height},
            scale="css",
            animations="disabled",
            caret="hide",
            timeout=seconds * 1000,
        )
        if png.startswith(PNG_SIGNATURE) and len(png) <= MAX_BYTES:
            return png
    return None
