"""The navigations a page makes of itself while it loads (``location.href = ...``,
``location.replace``, a meta refresh, ``form.submit()``): followed, so the page is read where it
sends a reader, as a browser would, but bounded and judged.

Each one is judged before the browser may make it, as the egress proxy would judge its tunnel (an
https URL of an allowed port, its name resolved through the guardian's resolver and every answer
allowed); the proxy then judges the tunnel again when it is opened. A refused one is answered
"204 No Content", so the browser keeps the page it has. At most ``MAX_NAVIGATIONS`` are followed;
past that the page stays where it is. A form POST is followed only to the page's own origin: an
agent reading a page must not send data to another site on the page's behalf.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from worker.errors import DnsFailure, GuardianRefusal
from worker.guardian.connector import GuardedResolver
from worker.guardian.urls import check_url

if TYPE_CHECKING:
    from aiohttp.abc import AbstractResolver

    from worker.guardian.policy import AddressPolicy

MAX_NAVIGATIONS = 5
# A meta refresh due this soon after load is waited for, as a reader would see it happen.
REFRESH_WAIT_S = 3.0
# Ours, run in the loaded page: the delay in seconds of a meta refresh that goes somewhere, or null.
REFRESH_DELAY = """
() => {
  for (const meta of document.querySelectorAll("meta[http-equiv]")) {
    if (meta.httpEquiv.toLowerCase() !== "refresh") continue;
    const m = (meta.content || "").match(/^\\s*(\\d+(?:\\.\\d*)?)\\s*[;,]\\s*(?:url\\s*=\\s*)?(\\S)/i);
    if (m) return parseFloat(m[1]);
  }
  return null;
}
"""


class Navigations:
    """One render's followed navigations: judged, counted, and each one's load awaited."""

    def __init__(
        self, policy: AddressPolicy, resolver: AbstractResolver | None, ports: frozenset[int]
    ) -> None:
        self._policy = policy
        self._resolver = GuardedResolver(policy, resolver)
        self._ports = ports
        self.followed: list[str] = []
        self.loaded = 0  # how many of ``followed`` had been started when the page last loaded
        self.loads = 0
        self.refused = 0  # navigations answered 204: the page stays, but its load may never fire
        self._load = asyncio.Event()

    @property
    def pending(self) -> bool:
        """No page loaded yet, or a followed navigation whose page has not loaded yet."""
        return self.loads == 0 or self.loaded < len(self.followed)

    def on_load(self) -> None:
        self.loads += 1
        self.loaded = len(self.followed)
        self._load.set()

    def on_refused(self) -> None:
        self.refused += 1
        self._load.set()

    async def until_loaded(self, seconds: float) -> bool:
        """Wait for the load of the page a followed navigation went to, or for a refusal (after
        which Chromium may never fire the load: the caller reads once the document is parsed);
        whether the page loaded."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                while self.pending and not self.refused:
                    self._load.clear()
                    await self._load.wait()
        return not self.pending

    async def admit(self, url: str, method: str, current: str) -> bool:
        """Whether the page may go to ``url`` (counted when it may)."""
        if len(self.followed) >= MAX_NAVIGATIONS:
            return False
        if method not in ("GET", "HEAD") and not _same_origin(url, current):
            return False
        try:
            target = check_url(url, self._policy)
        except GuardianRefusal:
            return False
        if target.port not in self._ports:
            return False
        if target.address is None:
            try:
                await self._resolver.resolve(target.host, target.port)
            except (GuardianRefusal, DnsFailure, OSError):
                return False
        self.followed.append(url)
        return True


def _same_origin(url: str, current: str) -> bool:
    a, b = urlsplit(url), urlsplit(current)
    return (a.scheme, a.hostname, a.port) == (b.scheme, b.hostname, b.port)
