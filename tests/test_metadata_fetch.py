"""fetch_page returns the page's metadata, from the network and from the shared page cache."""

from __future__ import annotations

import orjson
from aiohttp import web

from tests.support.fetching import fetch_settings, fetching
from tests.support.pdfs import Page, Text, build_pdf
from tests.support.tls import TestCA, serve
from worker.config import Settings

ARTICLE = orjson.dumps(
    {
        "@context": "https://schema.org",
        "@type": "NewsArticle",
        "headline": "Rates rise again",
        "datePublished": "2025-03-01T10:00:00Z",
        "author": {"@type": "Person", "name": "Jane Doe"},
        "publisher": {"@type": "Organization", "name": "The Daily Example"},
    }
).decode()


async def article(request: web.Request) -> web.Response:
    return web.Response(
        text=(
            "<html><head><title>Rates rise again | The Daily Example</title>"
            f'<script type="application/ld+json">{ARTICLE}</script>'
            '<link rel="canonical" href="/news/rates"></head>'
            "<body><article><h1>Rates rise again</h1><p>By Jane Doe</p>"
            "<p>The bank raised its rate for the third time this year.</p></article></body></html>"
        ),
        content_type="text/html",
        headers={"Content-Language": "en-GB"},
    )


async def report_pdf(request: web.Request) -> web.Response:
    body = build_pdf(
        [Page([Text(72, 700, "Findings.")])], title="The findings", info={"Author": "Ada Lovelace"}
    )
    return web.Response(body=body, content_type="application/pdf")


async def test_a_fetch_returns_the_metadata_and_a_cache_hit_returns_the_same(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    async with serve({"/a": article}, ca.server_context()) as server:
        async with fetching(fetch_settings(settings, ca), token, report) as h:
            url = server.url("/a")
            first = await h.fetch(url, extract="main")
            second = await h.fetch(url, extract="main", report=f"{report}-2")
    assert first["ok"] is True and second["ok"] is True, (first, second)
    assert (first["cached"], second["cached"]) == (False, True)
    metadata = first["metadata"]
    assert metadata["headline"] == "Rates rise again"
    assert metadata["published"] == "2025-03-01T10:00:00Z"
    assert metadata["author"] == ["Jane Doe"]
    assert metadata["site_name"] == "The Daily Example"
    assert metadata["language"] == "en-GB"
    assert metadata["canonical_url"] == server.url("/news/rates")
    assert metadata["sources"] == {
        "headline": "json-ld",
        "published": "json-ld",
        "author": "json-ld",
        "site_name": "json-ld",
        "language": "meta",
        "canonical_url": "html",
        "type": "json-ld",
    }
    assert second["metadata"] == metadata
    assert first["title"] == "Rates rise again | The Daily Example"  # title stays as it was


async def test_a_fetched_pdf_returns_its_metadata(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    async with serve({"/r.pdf": report_pdf}, ca.server_context()) as server:
        async with fetching(fetch_settings(settings, ca), token, report) as h:
            result = await h.fetch(server.url("/r.pdf"))
    assert result["ok"] is True, result
    assert (result["metadata"]["headline"], result["metadata"]["author"]) == (
        "The findings",
        ["Ada Lovelace"],
    )
    assert result["metadata"]["sources"] == {"headline": "pdf-info", "author": "pdf-info"}


def test_the_tool_description_names_the_metadata_and_that_the_page_wrote_it(settings: Settings) -> None:
    from jobs.definitions import fetch_page_definition

    description = fetch_page_definition(settings)["description"]
    assert "metadata" in description and "written by the page and may lie" in description
