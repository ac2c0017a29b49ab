"""A page that answers only when the test says so: a job is mid-fetch for exactly as long as needed."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from aiohttp import web


@dataclass
class HeldPage:
    asked: asyncio.Event = field(default_factory=asyncio.Event)  # the worker is fetching it
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def handler(self, request: web.Request) -> web.Response:
        self.asked.set()
        await self.release.wait()
        return web.Response(
            text="<title>A page</title><main><p>Some text.</p></main>", content_type="text/html"
        )
