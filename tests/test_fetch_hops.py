"""A fetch's HopLog (worker/guardian/redirects.py) and the URL a job names, parsed once
(jobs/facts.py): what the log records is exactly what the report's rule let through, and
the parse a job's about and run share is the guardian's own, refusals never kept."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobs.facts import parsed_url, url_about
from worker.errors import DestinationBlocked, GuardianRefusal, SchemeNotAllowed, UrlNotInMenu
from worker.guardian.redirects import HopLog
from worker.guardian.urls import Target, canonical_url, parse_https_url

HOSTS = st.lists(st.sampled_from(["a.test", "b.test", "c.test", "d.test", "e.test"]), max_size=8)


def target(host: str) -> Target:
    return parse_https_url(f"https://{host}/")


@given(chain=HOSTS, allowed=st.sets(st.sampled_from(["a.test", "b.test", "c.test", "d.test", "e.test"])))
def test_the_log_keeps_the_hops_the_rule_passed_and_the_host_that_answered_last(
    chain: list[str], allowed: set[str]
) -> None:
    async def rule(current: Target, following: Target) -> None:
        if following.host not in allowed:
            raise UrlNotInMenu(f"{following.host} is not on the menu")

    first = target("start.test")
    log = HopLog(rule, first)

    async def walk() -> str | None:
        current = first
        for host in chain:
            following = target(host)
            try:
                await log.follow(current, following)
            except UrlNotInMenu:
                return host
            current = following
        return None

    refused = asyncio.run(walk())
    # The oracle: the chain up to the first host outside the allowed set.
    passed = []
    for host in chain:
        if host not in allowed:
            break
        passed.append(host)
    assert refused == (None if len(passed) == len(chain) else chain[len(passed)])
    previous = ["start.test", *passed]
    assert log.hops == tuple(
        (f"https://{a}/", f"https://{b}/") for a, b in zip(previous, passed, strict=False)
    )
    assert log.answering.host == previous[-1]


@given(url=st.sampled_from(["https://Example.ORG/a/../b?q=1", "https://example.org", "https://[::1]:8443/x"]))
def test_a_url_parsed_once_is_the_guardians_own_parse(url: str) -> None:
    assert parsed_url(url) == parse_https_url(url)
    assert url_about({"url": f"  {url} "}) == {"url": canonical_url(url)}


@pytest.mark.parametrize(
    ("url", "refusal"),
    [("http://example.org/", SchemeNotAllowed), ("https://user@example.org/", DestinationBlocked)],
)
def test_a_refused_url_is_refused_again_each_time_and_about_says_it_as_given(
    url: str, refusal: type[GuardianRefusal]
) -> None:
    for _ in range(2):
        with pytest.raises(refusal):
            parsed_url(url)
    assert url_about({"url": url}) == {"url": url}
