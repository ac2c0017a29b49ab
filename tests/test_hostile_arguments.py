"""Hostile job arguments: any payload gets a contract error kind, never a crash, never a request.

The worker runs both real tools with the URL menu on and no search key, so even arguments that
happen to be valid end in url_not_in_menu or upstream_error without touching the network.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.fetch.tool import FetchPageTool
from jobs.search import WebSearchTool
from tests.support.workers import running_worker
from worker.client import ResearchClient
from worker.config import Secret, Settings

EXPECTED = {
    "invalid_request",
    "missing_report_id",
    "url_not_in_menu",
    "scheme_not_allowed",
    "destination_blocked",
    "upstream_error",
}

values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True),
    st.text(max_size=50),
    st.text(min_size=2001, max_size=2100),
    st.sampled_from(["https://a.test/", "http://a.test/", "main", "full", "r-1", "x" * 9000, ""]),
    st.lists(st.integers(min_value=-1000, max_value=1000), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(min_value=-1000, max_value=1000), max_size=3),
)
names = st.sampled_from(
    ["report_id", "url", "extract", "query", "max_results", "org_id", "admin", "_job_id", "x" * 300]
)
payloads = st.dictionaries(names, values, max_size=6)


@pytest.fixture
async def client(settings: Settings, token: str) -> AsyncIterator[ResearchClient]:
    s = dataclasses.replace(settings, url_menu=True, openrouter_api_key=Secret(""))
    async with (
        running_worker(s, [FetchPageTool(), WebSearchTool()]),
        ResearchClient(settings=s, job_id_prefix=f"{token}-", wait_s=20) as c,
    ):
        yield c


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tool=st.sampled_from(["fetch_page", "web_search"]), kwargs=payloads)
async def test_any_payload_gets_a_contract_error_kind(
    client: ResearchClient, tool: str, kwargs: dict[str, Any]
) -> None:
    result = await client.call(tool, kwargs)
    assert result["ok"] is False
    assert result["error"]["kind"] in EXPECTED, result
    assert result["tool"] == tool


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    report_id=st.one_of(
        st.text(max_size=250), st.integers(min_value=-(2**63), max_value=2**63 - 1), st.none()
    )
)
async def test_report_ids_are_accepted_only_in_the_contracts_alphabet(
    client: ResearchClient, report_id: object
) -> None:
    result = await client.call("fetch_page", {"report_id": report_id, "url": "https://a.test/"})
    valid = (
        isinstance(report_id, str)
        and 1 <= len(report_id) <= 200
        and all(c.isascii() and (c.isalnum() or c in "-_.:") for c in report_id)
    )
    assert result["error"]["kind"] == ("url_not_in_menu" if valid else "missing_report_id")
