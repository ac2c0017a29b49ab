"""A Retry-After past the deadline is given up on at once, in rate_limited (issue 24, class 14).

The search provider's answers go through ``retrying``; a page's host's through the fetch and its
politeness. Either way, a wait asked for that ends after the job's deadline is never waited out
or retried on the backoff schedule: the job ends at once, and a value too large to be meant (a
number of any length, a date past the year 9999) counts as far past, not as no hint.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time

import pytest
from aiohttp import web
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from jobs.providers import upstream
from jobs.providers.base import Deadline
from jobs.providers.upstream import Retryable, retrying, status_failure
from tests.support.tls import TestCA
from tests.test_politeness import Host, polite_worker
from worker.config import Settings
from worker.errors import RateLimited, ResearchError
from worker.net.retry_after import MAX_RETRY_AFTER_S, retry_after_s

NOW = dt.datetime(2026, 12, 3, 12, 0, 0, tzinfo=dt.UTC)


def http_date(when: dt.datetime) -> str:
    return when.strftime("%a, %d %b %Y %H:%M:%S GMT")


@given(st.integers(0, 10**90))
def test_any_run_of_digits_is_a_wait_never_no_hint(seconds: int) -> None:
    assert retry_after_s(str(seconds), NOW) == min(float(seconds), MAX_RETRY_AFTER_S)


@given(st.integers(10_000, 10**8), st.sampled_from(["Mon", "Fri"]), st.integers(1, 28))
def test_a_date_past_the_year_9999_is_the_longest_wait(year: int, weekday: str, day: int) -> None:
    assert retry_after_s(f"{weekday}, {day:02d} Dec {year} 23:59:59 GMT", NOW) == MAX_RETRY_AFTER_S


@given(st.integers(1, 10**6))
def test_a_date_ahead_is_the_seconds_until_it(ahead_s: int) -> None:
    asked = retry_after_s(http_date(NOW + dt.timedelta(seconds=ahead_s)), NOW)
    assert asked == min(float(ahead_s), MAX_RETRY_AFTER_S)


# What a provider may send that asks for more than any search has (a search has at most a minute).
FAR_PAST = (
    st.integers(61, 10**40).map(str)
    | st.integers(61, 10**7).map(lambda s: http_date(dt.datetime.now(dt.UTC) + dt.timedelta(seconds=s)))
    | st.integers(10_000, 10**6).map(lambda year: f"Fri, 31 Dec {year} 23:59:59 GMT")
)


async def _search_answering(
    status: int, header: str, budget_s: float, then_ok: bool = False
) -> tuple[int, object]:
    calls = 0

    async def attempt() -> str:
        nonlocal calls
        calls += 1
        if then_ok and calls > 1:
            return "answer"
        raise Retryable(status_failure(status, "the search provider"), retry_after_s(header))

    loop = asyncio.get_running_loop()
    end = loop.time() + budget_s
    try:
        outcome: object = await retrying(attempt, Deadline(end, end, budget_s), "the search provider")
    except RateLimited as refused:
        outcome = refused
    return calls, outcome


@hypothesis_settings(max_examples=60, deadline=None)
@given(header=FAR_PAST, status=st.sampled_from([429, 503]), budget_s=st.floats(5.0, 60.0))
def test_a_search_asked_to_wait_past_its_deadline_gives_up_at_once_in_rate_limited(
    header: str, status: int, budget_s: float
) -> None:
    started = time.monotonic()
    calls, outcome = asyncio.run(_search_answering(status, header, budget_s))
    assert calls == 1
    assert isinstance(outcome, RateLimited)
    assert outcome.kind.value == "rate_limited"
    assert "more than this search had left" in outcome.message
    assert time.monotonic() - started < budget_s  # gave up, not waited out the budget


@hypothesis_settings(max_examples=15, deadline=None)
@given(header=st.sampled_from(["0", "0.01", "0.02"]), status=st.sampled_from([429, 503]))
def test_a_search_asked_for_a_wait_that_fits_is_retried(header: str, status: int) -> None:
    # The control: a wait inside the deadline is waited out and the next attempt answers.
    calls, outcome = asyncio.run(_search_answering(status, header, 10.0, then_ok=True))
    assert (calls, outcome) == (2, "answer")


@pytest.mark.parametrize(
    "header",
    [
        pytest.param("120", id="two minutes"),
        pytest.param("99999999999999", id="fourteen digits"),
        pytest.param("Fri, 31 Dec 99999 23:59:59 GMT", id="year 99999"),
        pytest.param(http_date(dt.datetime.now(dt.UTC) + dt.timedelta(days=3)), id="a date three days on"),
    ],
)
@pytest.mark.parametrize("status", [429, 503])
async def test_a_fetch_asked_to_wait_past_its_deadline_ends_at_once_and_so_do_later_ones(
    settings: Settings, ca: TestCA, token: str, report: str, header: str, status: int
) -> None:
    host = Host()
    host.answers["/limited"] = web.Response(status=status, headers={"Retry-After": header})
    async with polite_worker(settings, ca, token, host) as (server, _, client):
        started = time.monotonic()
        first = await client.fetch(report, server.url("/limited", name="site.test"))
        later = await client.fetch(f"{report}-2", server.url("/other", name="site.test"))
        elapsed = time.monotonic() - started
    assert (first["error"]["kind"], first["status"]) == ("rate_limited", status), first
    assert f"site.test:{server.port}" in first["error"]["message"]
    assert later["error"]["kind"] == "rate_limited", later
    assert [path for _, path in host.arrivals] == ["/limited"]  # the host was not asked again
    assert elapsed < 30.0  # not the wait asked for (two minutes and more); generous on a busy machine


async def test_a_fetch_asked_for_a_wait_inside_its_deadline_reports_the_hosts_status(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    host = Host()
    host.answers["/limited"] = web.Response(status=429, headers={"Retry-After": "1"})
    async with polite_worker(settings, ca, token, host) as (server, _, client):
        first = await client.fetch(report, server.url("/limited", name="site.test"))
    assert (first["error"]["kind"], first["status"]) == ("http_status", 429)


async def _search_failing_then_slow(budget_s: float, slow_s: float) -> tuple[int, object]:
    """A provider that answers 503 at once, then takes ``slow_s`` to answer 503 again."""
    calls = 0

    async def attempt() -> str:
        nonlocal calls
        calls += 1
        if calls > 1:
            await asyncio.sleep(slow_s)
        raise Retryable(status_failure(503, "the search provider"), None)

    end = asyncio.get_running_loop().time() + budget_s
    try:
        outcome: object = await retrying(attempt, Deadline(end, end, budget_s), "the search provider")
    except ResearchError as failure:
        outcome = failure
    return calls, outcome


@pytest.mark.parametrize("left_s", [0.01, 0.1, 0.2])
def test_a_retry_that_would_start_in_the_deadlines_last_moments_is_not_tried(
    left_s: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Tried, it could only run out of time: the provider's own failure is what the agent learns.
    budget_s = 1.0
    monkeypatch.setattr(upstream, "backoff_s", lambda attempt, retry_after: budget_s - left_s)
    calls, outcome = asyncio.run(_search_failing_then_slow(budget_s, 0.5))
    assert calls == 1
    assert isinstance(outcome, ResearchError) and outcome.kind.value != "timeout"
    assert "503" in outcome.message and "gave up after 1 attempt" in outcome.message


def test_a_wait_that_ran_late_past_the_deadline_leaves_the_failure_seen_not_a_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The retry fitted when its wait began; the event loop was then held (a busy worker, a paused
    # host) past the deadline, so the retry is not started under a spent deadline.
    monkeypatch.setattr(upstream, "backoff_s", lambda attempt, retry_after: 0.1)

    async def held() -> tuple[int, object]:
        asyncio.get_running_loop().call_later(0.05, time.sleep, 1.0)
        return await _search_failing_then_slow(0.8, 0.0)

    calls, outcome = asyncio.run(held())
    assert calls == 1
    assert isinstance(outcome, ResearchError) and outcome.kind.value != "timeout"
    assert "503" in outcome.message
