"""Redirects, followed by hand: every hop is a new URL that passes every check again."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import yarl

from worker.errors import DestinationBlocked
from worker.guardian.reasons import Reason
from worker.guardian.urls import (
    SCHEME,
    ClassifiesAddresses,
    Target,
    check_url,
    refuse_hidden_characters,
)
from worker.limits import MAX_URL_LENGTH

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})

# The report's rule for a redirect to another site (jobs/fetch/hops.py's report_rule): it returns
# when the hop may be followed and raises the refusal (url_not_in_menu, domain_not_allowed, ...)
# when not. Asked for every hop to another site, by the fetcher as it follows the hops and by the
# page cache for hops another report's fetch followed.
HopRule = Callable[[Target, Target], Awaitable[None]]


class HopLog:
    """One fetch's redirects to other sites: each asked of the report's rule; the ones followed
    recorded (the page cache keeps them, and every report that reads the page asks its own rule
    again), and the host whose answer ends the chain (a Retry-After holds that host)."""

    def __init__(self, rule: HopRule, first: Target) -> None:
        self.rule = rule
        self.followed: list[tuple[str, str]] = []
        self.answering = first

    async def follow(self, current: Target, following: Target) -> None:
        """A hop this fetch takes: judged, then recorded."""
        await self.rule(current, following)
        self.followed.append((current.url, following.url))
        self.answering = following

    @property
    def hops(self) -> tuple[tuple[str, str], ...]:
        return tuple(self.followed)


async def follow_any(current: Target, following: Target) -> None:
    """The hop rule of a fetch no report asked for (robots.txt, which RFC 9309 follows across
    sites): every hop is followed, and the guardian still judges each one."""


def next_hop(current: Target, location: str, policy: ClassifiesAddresses) -> Target:
    """Resolve a Location against the current URL and judge the result like a first URL.

    The raw Location is checked before it is joined, because joining is parsing: a backslash or a
    control character would be normalized away before the full check could see it. A Location
    the parser cannot read (a port out of range, brackets around something that is not IPv6) is a
    refusal like any other, never a crash: yarl checks some of it only when the URL is printed.
    """
    if not location:
        raise DestinationBlocked("the redirect has an empty Location", reason=Reason.MALFORMED_URL)
    if len(location) > MAX_URL_LENGTH:
        raise DestinationBlocked("the redirect's Location is too long", reason=Reason.MALFORMED_URL)
    refuse_hidden_characters(location)
    scheme = SCHEME.match(location)
    if scheme is not None and location[scheme.end() :].startswith("//"):
        return check_url(location, policy)  # absolute: judged as written, nothing to join
    if location.startswith("//"):
        return check_url("https:" + location, policy)  # scheme-relative: a new host, judged in full
    try:
        joined = str(yarl.URL(current.url, encoded=True).join(yarl.URL(location, encoded=True)))
    except (ValueError, TypeError, IndexError, UnicodeError, OverflowError):
        raise DestinationBlocked(
            "the redirect's Location is not a URL", reason=Reason.MALFORMED_URL
        ) from None
    return check_url(joined, policy)


def same_site(a: Target, b: Target) -> bool:
    """Same host (or its www. twin) and same port."""
    return a.site == b.site
