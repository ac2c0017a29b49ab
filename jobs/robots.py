"""robots.txt, read as RFC 9309 says, before a fetch when the operator turns it on (RESEARCH_ROBOTS).

The file is fetched like any page, through the guardian (every hop judged, connections pinned), at
most 500 KiB of it (RFC 9309 asks parsers to read at least that much), and parsed by protego. What
the site answered decides, and is kept per site in Redis for every worker, for the answer's own
freshness (Cache-Control max-age) and at most 24 hours:

- 2xx: the rules, for this worker's product token (the User-Agent's first word);
- 4xx (but 429), a redirect the guardian will not follow (to http, say), too many redirects, or a
  body that is not text: the file is unavailable, so everything is allowed;
- 5xx, 429, or no answer at all (DNS, connection, TLS, timeout): the site is unreachable, so
  everything is disallowed, and the verdict is kept only briefly so a short outage blocks briefly.

A refusal is ``robots_disallowed`` and, being decided before the budget is charged, costs nothing.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import orjson
from protego import Protego
from redis.exceptions import RedisError

from jobs.fetcher import Fetcher, FetchLimits
from worker.errors import (
    ConnectionFailed,
    DestinationBlocked,
    DnsFailure,
    DomainNotAllowed,
    HttpStatus,
    ResearchError,
    RobotsDisallowed,
    Timeout,
)
from worker.guardian.domains import DomainPolicy
from worker.guardian.redirects import HopRule, follow_any
from worker.guardian.urls import Target, parse_https_url
from worker.logs import fields
from worker.state import keys

if TYPE_CHECKING:
    import aiohttp
    from redis.asyncio import Redis

    from worker.guardian.policy import AddressPolicy

log = logging.getLogger("research.robots")

MAX_BYTES = 500 * 1024
MAX_FRESH_S = 24 * 3600
UNREACHABLE_FRESH_S = 300  # a site that could not be reached is asked again after this
MIN_FRESH_S = 60
FETCH_TIMEOUT_S = 5.0
LOCAL_ENTRIES = 1024  # parsed rules kept in memory per worker, so a hit parses nothing
MAX_AGE = re.compile(r"(?:^|,)\s*max-age\s*=\s*\"?(\d{1,10})\"?", re.IGNORECASE)


@dataclass(frozen=True)
class Verdict:
    """What a site's robots.txt says, as kept: ``rules`` (with the file's text), ``allow`` or
    ``disallow`` (everything), and why, in the worker's words."""

    kind: str
    why: str
    text: str = ""


# A group's user-agent line, read for its product token as RFC 9309 (2.2.1) and the major
# crawlers do: the leading letters, "_" and "-", so a group written for "research-worker/0.1" or
# "research-worker/0.1 (+https://...)" is the group for "research-worker".
USER_AGENT_LINE = re.compile(r"(?im)^([ \t]*user-agent[ \t]*:[ \t]*)([A-Za-z_-]+)[^\r\n#]*")


def rules_text(text: str) -> str:
    """The file as protego should read it: without a byte-order mark (which would hide its first
    line), each user-agent line cut to its product token."""
    return USER_AGENT_LINE.sub(r"\1\2", text.removeprefix("\ufeff"))


def domain_hops(domains: DomainPolicy) -> HopRule:
    """robots.txt's redirects to another site are judged by the deployment's domain lists, as a
    page's are: a robots.txt must not be a way to reach a blocked domain."""

    async def may_follow(current: Target, following: Target) -> None:
        refusal = domains.refusal(following.host)
        if refusal is not None:
            raise DomainNotAllowed(f"{refusal}, so robots.txt is not read from it")

    return may_follow


def product_token(user_agent: str) -> str:
    """The User-Agent's product name ("research-worker/0.1 (+...)" -> "research-worker")."""
    return re.split(r"[/\s]", user_agent.strip(), maxsplit=1)[0] or user_agent


class Robots:
    def __init__(
        self,
        redis: Redis,
        session: aiohttp.ClientSession,
        policy: AddressPolicy,
        user_agent: str,
        *,
        max_redirects: int = 5,
        domains: DomainPolicy | None = None,
        queue_name: str = "",
    ) -> None:
        self._redis = redis
        self._queue_name = queue_name
        self._hops = domain_hops(domains) if domains is not None else follow_any
        # A fetcher of its own on the shared session: the same guardian, a robots-sized byte cap.
        self._fetcher = Fetcher(session, policy, FetchLimits(MAX_BYTES, MAX_BYTES, max_redirects))
        self._token = product_token(user_agent)
        self._parsed: dict[tuple[str, int], tuple[float, Verdict, Protego | None]] = {}

    async def check(self, target: Target, until: float) -> None:
        """Raise RobotsDisallowed when the site's robots.txt disallows ``target`` for this worker."""
        verdict, rules = await self._verdict(target, until)
        if verdict.kind == "allow" or (rules is not None and rules.can_fetch(target.url, self._token)):
            return
        if verdict.kind == "disallow":
            raise RobotsDisallowed(
                f"{target.host}'s robots.txt could not be read ({verdict.why}), which disallows"
            )
        raise RobotsDisallowed(f"{target.host}'s robots.txt disallows this URL for {self._token}")

    async def _verdict(self, target: Target, until: float) -> tuple[Verdict, Protego | None]:
        site = (target.host, target.port)
        now = time.time()
        local = self._parsed.get(site)
        if local is not None and local[0] > now:
            return local[1], local[2]
        key = keys.robots(self._queue_name, *site)
        verdict = await self._cached(key)
        if verdict is None:
            verdict, fresh_s = await self._read(target, until)
            try:
                await self._redis.set(key, orjson.dumps(verdict.__dict__), ex=fresh_s)
            except RedisError as exc:
                log.warning(
                    "robots.txt verdict not shared", extra=fields(host=target.host, error=type(exc).__name__)
                )
            expires = now + fresh_s
        else:
            ttl = await self._redis.ttl(key)
            expires = now + max(1, ttl)
        rules = Protego.parse(rules_text(verdict.text)) if verdict.kind == "rules" else None
        if len(self._parsed) >= LOCAL_ENTRIES:
            self._parsed.clear()
        self._parsed[site] = (expires, verdict, rules)
        return verdict, rules

    async def _cached(self, key: str) -> Verdict | None:
        try:
            raw = await self._redis.get(key)
        except RedisError:
            return None
        if raw is None:
            return None
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(value, dict) or value.get("kind") not in {"rules", "allow", "disallow"}:
            return None
        if not isinstance(value.get("why"), str) or not isinstance(value.get("text"), str):
            return None
        return Verdict(value["kind"], value["why"], value["text"])

    async def _read(self, target: Target, until: float) -> tuple[Verdict, int]:
        """Fetch and judge the site's robots.txt; the verdict and how long it stays fresh."""
        authority = target.host if target.port == 443 else f"{target.host}:{target.port}"
        if ":" in target.host:
            authority = f"[{target.host}]" if target.port == 443 else f"[{target.host}]:{target.port}"
        robots = parse_https_url(f"https://{authority}/robots.txt")
        seconds = max(0.1, min(FETCH_TIMEOUT_S, until - asyncio.get_running_loop().time()))

        try:
            async with asyncio.timeout(seconds):
                fetched = await self._fetcher.get(robots, self._hops)
        except TimeoutError:
            return Verdict("disallow", f"no answer within {seconds:g} s"), UNREACHABLE_FRESH_S
        except HttpStatus as answer:
            status = answer.status or 0
            if 400 <= status < 500 and status != 429:
                return Verdict("allow", f"HTTP {status}"), MAX_FRESH_S
            return Verdict("disallow", f"HTTP {status}"), UNREACHABLE_FRESH_S
        except (DnsFailure, ConnectionFailed, Timeout, DestinationBlocked) as failure:
            return Verdict("disallow", failure.kind.value), UNREACHABLE_FRESH_S
        except ResearchError as other:
            # A redirect to http, off the guardian's map or to a blocked domain, too many redirects,
            # a binary body: the file is not available to this crawler, which RFC 9309 reads as no
            # rules at all.
            return Verdict("allow", other.kind.value), MAX_FRESH_S
        text = fetched.body.decode("utf-8", errors="replace")
        return Verdict("rules", "read", text), _fresh_s(fetched.cache_control)


def _fresh_s(cache_control: str | None) -> int:
    match = MAX_AGE.search(cache_control or "")
    if match is None:
        return MAX_FRESH_S
    return max(MIN_FRESH_S, min(MAX_FRESH_S, int(match.group(1))))
