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

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from worker.errors import DnsFailure, GuardianRefusal
from worker.guardian.connector import GuardedResolver
from worker.guardian.urls import check_url

if TYPE_CHECKING:
    from aiohttp.abc import AbstractResolver

    from worker.guardian.policy import AddressPolicy

MAX_NAVIGATIONS = 5


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

    @property
    def pending(self) -> bool:
        """A followed navigation whose page has not loaded yet."""
        return self.loaded < len(self.followed)

    def on_load(self) -> None:
        self.loaded = len(self.followed)

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
