"""Long documents through a real worker: read by pieces, jumped into by page, searched with find.

A local TLS server serves a long HTML page and a long PDF and counts the requests that reach it:
continuations must reach it never, and cost no fetch.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import redis.asyncio as aioredis
from aiohttp import web

from tests.support.fetching import FetchHarness, fetch_settings, fetching
from tests.support.pdfs import Page, Text, build_pdf
from tests.support.tls import TestCA, serve
from worker.client import UnsafeArguments
from worker.config import Settings
from worker.state import keys

PAGES = 300
PHRASE = "substantial doubt about the going concern"


def long_pdf() -> bytes:
    pages = []
    for n in range(1, PAGES + 1):
        lines = [Text(72, 700, f"Page {n} of the annual report.")]
        lines += [
            Text(72, 680 - 14 * i, f"Line {i} of page {n}: revenue, costs and risks.") for i in range(8)
        ]
        if n == 250:
            lines.append(Text(72, 500, f"The auditor notes {PHRASE.upper()} of the group."))
        pages.append(Page(lines))
    return build_pdf(pages, compress=True)


def long_html() -> str:
    sections = "".join(
        f"<h2>Section {n}</h2><p>Paragraph {n} says something about the company, its people and its "
        f"money, with an accent é and an emoji \U0001f600 now and then.</p>"
        for n in range(1, 3000)
    )
    return f"<html><title>Long</title><body><article>{sections}</article></body></html>"


PDF = long_pdf()
HTML = long_html()


@dataclasses.dataclass
class Served:
    harness: FetchHarness
    pdf_url: str
    html_url: str
    requests: list[str]


@asynccontextmanager
async def long_documents(
    settings: Settings, ca: TestCA, token: str, report: str, **changes: Any
) -> AsyncIterator[Served]:
    requests: list[str] = []

    async def pdf(request: web.Request) -> web.Response:
        requests.append(request.path)
        return web.Response(body=PDF, content_type="application/pdf")

    async def html(request: web.Request) -> web.Response:
        requests.append(request.path)
        return web.Response(text=HTML, content_type="text/html")

    async with serve({"/report.pdf": pdf, "/long.html": html}, ca.server_context()) as server:
        async with fetching(fetch_settings(settings, ca, **changes), token, report) as h:
            yield Served(h, server.url("/report.pdf"), server.url("/long.html"), requests)


async def read_all(h: FetchHarness, url: str, **arguments: Any) -> tuple[list[dict[str, Any]], str]:
    pieces = [await h.client.fetch(h.report, url, extract="full", **arguments)]
    while pieces[-1].get("next_offset") is not None:
        assert pieces[-1]["ok"] is True, pieces[-1]
        pieces.append(
            await h.client.fetch(h.report, url, extract="full", offset=pieces[-1]["next_offset"], **arguments)
        )
    return pieces, "".join(piece["text"] for piece in pieces)


async def fetches_charged(redis: aioredis.Redis, report: str) -> int:
    return int(await redis.hget(keys.budget(report), "fetch") or 0)


@pytest.mark.parametrize("fmt", ["markdown", "text"])
async def test_a_300_page_pdf_read_by_pieces_is_exactly_the_whole_for_one_request_and_one_fetch(
    settings: Settings, ca: TestCA, token: str, report: str, redis: aioredis.Redis, fmt: str
) -> None:
    async with long_documents(settings, ca, token, report) as s:
        pieces, whole = await read_all(s.harness, s.pdf_url, format=fmt)
    first = pieces[0]
    assert len(pieces) > 1
    assert first["pages"] == first["pages_read"] == PAGES
    assert first["truncated"] is False
    assert len(whole) == first["total_chars"]
    assert all(p["offset"] == sum(len(q["text"]) for q in pieces[:i]) for i, p in enumerate(pieces))
    assert [p["refetched"] for p in pieces] == [False] * len(pieces)
    assert s.requests == ["/report.pdf"]
    assert await fetches_charged(redis, report) == 1
    offsets = first["page_offsets"]
    assert len(offsets) == PAGES
    # Each offset is the page's first line: its marker in Markdown, its first words in text.
    marked = fmt == "markdown"
    first_lines = [
        f"<!-- page {n} -->" if marked else f"Page {n} of the annual report." for n in range(1, PAGES + 1)
    ]
    assert all(whole[at:].startswith(line) for line, at in zip(first_lines, offsets, strict=True))


async def test_find_finds_a_phrase_on_page_250_with_its_offset_and_costs_no_fetch(
    settings: Settings, ca: TestCA, token: str, report: str, redis: aioredis.Redis
) -> None:
    async with long_documents(settings, ca, token, report) as s:
        first = await s.harness.client.fetch(report, s.pdf_url, extract="full")
        found = await s.harness.client.fetch(report, s.pdf_url, extract="full", find="Going  Concern")
        at_page = await s.harness.client.fetch(
            report, s.pdf_url, extract="full", offset=first["page_offsets"][249]
        )
    assert found["ok"] is True, found
    assert found["text"] == "" and found["next_offset"] is None
    [match] = found["matches"]
    assert first["page_offsets"][249] <= match["offset"] < first["page_offsets"][250]
    assert "GOING CONCERN" in match["snippet"] and len(match["snippet"]) <= 300
    assert at_page["text"][match["offset"] - at_page["offset"] :].startswith("GOING CONCERN")
    assert s.requests == ["/report.pdf"]
    assert await fetches_charged(redis, report) == 1


@pytest.mark.parametrize(("fmt", "start"), [("markdown", "## Section 1\n"), ("text", "Section 1\n")])
async def test_a_long_html_page_read_by_small_pieces_joins_into_its_whole_text(
    settings: Settings, ca: TestCA, token: str, report: str, fmt: str, start: str
) -> None:
    async with long_documents(settings, ca, token, report) as s:
        _, by_small = await read_all(s.harness, s.html_url, max_chars=7_777, format=fmt)
        _, by_default = await read_all(s.harness, s.html_url, format=fmt)
    assert by_small == by_default
    assert "Paragraph 2999 says" in by_small and by_small.startswith(start)
    assert s.requests == ["/long.html"]


async def test_the_read_budget_ends_a_report_that_reads_too_much_charging_exactly_what_it_returned(
    settings: Settings, ca: TestCA, token: str, report: str, redis: aioredis.Redis
) -> None:
    async with long_documents(settings, ca, token, report, read_budget_chars=50_000) as s:
        client = s.harness.client
        first = await client.fetch(report, s.pdf_url, extract="full")
        pieces = [await client.fetch(report, s.pdf_url, extract="full", offset=40_000)]
        while pieces[-1]["ok"] and len(pieces) < 20:
            onward = pieces[-1]["next_offset"]
            pieces.append(await client.fetch(report, s.pdf_url, extract="full", offset=onward))
        used = int(await redis.hget(keys.budget(report), "read_chars") or 0)
    *read, refused = pieces
    # A whole piece first; then what the budget has left, each cut by it and saying so, each ending
    # at a boundary (so a little short of its grant, which is given back), until nothing is left.
    assert len(read[0]["text"]) > 36_000 and "read_budget_cut" not in read[0]
    assert all(p["read_budget_cut"] is True for p in read[1:]) and len(read) >= 2
    assert all(p["offset"] == q["next_offset"] for q, p in itertools.pairwise(read))
    assert sum(len(p["text"]) for p in read) == used == 50_000
    assert first["ok"] is True
    assert refused["ok"] is False
    assert refused["error"]["kind"] == "budget_exhausted"
    assert "read budget" in refused["error"]["message"]


async def test_a_continuation_whose_kept_document_is_gone_is_fetched_again_charged_and_says_so(
    settings: Settings, ca: TestCA, token: str, report: str, redis: aioredis.Redis
) -> None:
    async with long_documents(settings, ca, token, report, cache_ttl_s=0) as s:
        client = s.harness.client
        first = await client.fetch(report, s.html_url, extract="full")
        noted = await redis.get(keys.document_note(report, "full", first["url"]))
        assert noted is not None
        await redis.delete(keys.document(noted.decode()))
        again = await client.fetch(report, s.html_url, extract="full", offset=first["next_offset"])
    assert again["ok"] is True, again
    assert again["refetched"] is True
    assert again["offset"] == first["next_offset"]
    assert s.requests == ["/long.html", "/long.html"]
    assert await fetches_charged(redis, report) == 2


# 1e30 is what a model's 10**30 becomes once JSON has carried it.
BAD_OFFSETS = [-1, 1.5, 40000.0, True, "10", None, 1e30, 4_000_001, [1]]
BAD_MAX_CHARS = [0, -5, 40_001, 2.0, False, "100", 1e30]
BAD_FINDS = ["", "   \n\t", "x" * 201, "\u200b\u200d\u2060", "a\x00b", 5, ["going"]]


@pytest.mark.parametrize(
    "arguments",
    [{"offset": v} for v in BAD_OFFSETS]
    + [{"max_chars": v} for v in BAD_MAX_CHARS]
    + [{"find": v} for v in BAD_FINDS],
    ids=repr,
)
async def test_a_bad_offset_max_chars_or_find_is_invalid_request_and_charged_nothing(
    settings: Settings, ca: TestCA, token: str, report: str, redis: aioredis.Redis, arguments: dict[str, Any]
) -> None:
    async with long_documents(settings, ca, token, report) as s:
        call = {"url": s.html_url, "extract": "full", **arguments}
        result = await s.harness.client.run("fetch_page", {"report_id": report, **call})
    assert result["ok"] is False
    assert result["error"]["kind"] == "invalid_request", result
    assert s.requests == []
    assert await fetches_charged(redis, report) == 0


async def test_an_offset_no_job_can_carry_is_refused_by_the_client_before_anything_is_enqueued(
    settings: Settings, ca: TestCA, token: str, report: str, redis: aioredis.Redis
) -> None:
    async with long_documents(settings, ca, token, report) as s:
        with pytest.raises(UnsafeArguments):
            await s.harness.client.fetch(report, s.html_url, offset=10**30)
    assert s.requests == []
    assert await fetches_charged(redis, report) == 0


async def test_an_offset_at_the_end_is_an_empty_piece_and_one_past_it_is_refused(
    settings: Settings, ca: TestCA, token: str, report: str, redis: aioredis.Redis
) -> None:
    async with long_documents(settings, ca, token, report) as s:
        client = s.harness.client
        first = await client.fetch(report, s.html_url, extract="full")
        end = await client.fetch(report, s.html_url, extract="full", offset=first["total_chars"])
        past = await client.fetch(report, s.html_url, extract="full", offset=first["total_chars"] + 1)
    assert end["ok"] is True and end["text"] == "" and end["next_offset"] is None
    assert past["ok"] is False and past["error"]["kind"] == "invalid_request"
    assert await fetches_charged(redis, report) == 1
    assert s.requests == ["/long.html"]


async def test_a_regex_looking_find_is_searched_as_the_literal_text_it_is(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    async with long_documents(settings, ca, token, report) as s:
        client = s.harness.client
        await client.fetch(report, s.html_url, extract="full")
        found = await client.fetch(report, s.html_url, extract="full", find="(a+)+$")
        dotted = await client.fetch(report, s.html_url, extract="full", find="paragraph 1.")
    assert found["ok"] is True and found["matches"] == []
    assert dotted["matches"] == []  # "." is a full stop, not any character: "Paragraph 10" does not match
