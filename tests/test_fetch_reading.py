"""Reading through a real worker: find over what a reader sees, and the documents a page embeds.

The oracles are the page's own strings as written here, their Markdown-escaped forms written by
hand, and the URLs the page names, resolved by hand.
"""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis
from aiohttp import web

from jobs.reader.embedded import MAX_DOCUMENTS
from tests.support.fetching import fetch_settings, fetching
from tests.support.pdfs import text_pdf
from tests.support.tls import TestCA, serve
from worker.config import Settings
from worker.state import keys
from worker.state.pages.documents import KeptDocuments

# What a reader sees, and how the Markdown writes it (escaped by hand).
NAMED = {
    "snake_case_name": "snake\\_case\\_name",
    "a*b*c": "a\\*b\\*c",
    "[1]": "\\[1\\]",
    "back\\slash": "back\\\\slash",
    "100% | 50%": "100% \\| 50%",
}
ARTICLE = (
    "<html><head><title>Notes</title></head><body><main><h1>Notes</h1>"
    + "".join(f"<p>Paragraph {n} names {seen} among other words.</p>" for n, seen in enumerate(NAMED))
    + "</main></body></html>"
)
PDF = text_pdf("The first page says little.", "The second page names snake_case_name.", title="Two")


async def test_find_in_the_default_markdown_finds_what_a_reader_sees_at_offsets_into_the_markdown(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    async def article(request: web.Request) -> web.Response:
        return web.Response(text=ARTICLE, content_type="text/html")

    async def pdf(request: web.Request) -> web.Response:
        return web.Response(body=PDF, content_type="application/pdf")

    async with (
        serve({"/notes": article, "/two.pdf": pdf}, ca.server_context()) as server,
        fetching(fetch_settings(settings, ca), token, report) as h,
    ):
        url, doc = server.url("/notes"), server.url("/two.pdf")
        whole = await h.client.fetch(report, url)
        found = {seen: await h.client.fetch(report, url, find=seen) for seen in NAMED}
        in_text = {seen: await h.client.fetch(report, url, find=seen, format="text") for seen in NAMED}
        first = await h.client.fetch(report, doc)
        in_pdf = await h.client.fetch(report, doc, find="snake_case_name")
    assert whole["format"] == "markdown" and whole["next_offset"] is None
    for seen, written in NAMED.items():
        assert written in whole["text"] and seen not in whole["text"]
        [match] = found[seen]["matches"]
        assert found[seen]["format"] == "markdown"
        assert whole["text"][match["offset"] :].startswith(written), (seen, match)
        assert "page" not in match
        [plain] = in_text[seen]["matches"]
        assert in_text[seen]["format"] == "text" and seen in plain["snippet"]
    [match] = in_pdf["matches"]
    assert match["page"] == 2
    assert first["page_offsets"][1] <= match["offset"]


EMBEDDING = """<html><head><title>Annual report</title><base href="/reports/"></head><body><main>
<p>The annual report, in the viewer below.</p>
<iframe src="annual.pdf"></iframe>
<embed src="/files/summary.PDF" type="application/pdf">
<object data="/download?id=7" type="application/pdf"><embed src="fallback.pdf"></object>
<iframe src="/pdfjs/web/viewer.html?file=%2Fstatic%2Fdeck.pdf"></iframe>
<iframe src="https://www.youtube-nocookie.com/embed/xyz"></iframe>
<iframe src="javascript:alert(1)//.pdf"></iframe>
<embed src="data:application/pdf;base64,JVBERi0=" type="application/pdf">
<iframe src="/viewer.html?file=javascript:alert(1)"></iframe>
<iframe src="http://127.0.0.1/plain.pdf"></iframe>
<iframe src="https://127.0.0.2/internal.pdf"></iframe>
<iframe src="https://169.254.169.254/latest.pdf"></iframe>
<div hidden><iframe src="/hidden.pdf"></iframe></div>
<iframe src="annual.pdf#page=2"></iframe>
</main></body></html>"""


@pytest.mark.parametrize("fmt", ["markdown", "text"])
async def test_a_page_that_embeds_pdfs_lists_them_resolved_and_puts_them_on_the_menu(
    settings: Settings, ca: TestCA, token: str, report: str, redis: aioredis.Redis, fmt: str
) -> None:
    async def viewer(request: web.Request) -> web.Response:
        return web.Response(text=EMBEDDING, content_type="text/html")

    async def pdf(request: web.Request) -> web.Response:
        return web.Response(body=PDF, content_type="application/pdf")

    async with (
        serve({"/viewer": viewer, "/reports/annual.pdf": pdf}, ca.server_context()) as server,
        fetching(fetch_settings(settings, ca, url_menu=True), token, report) as h,
    ):
        page = server.url("/viewer")
        await h.client.seed_urls(report, [page])
        result = await h.client.fetch(report, page, format=fmt)
        # The agent may fetch what the page embeds: it is on the report's menu.
        annual = await h.client.fetch(report, server.url("/reports/annual.pdf"))
        menu = {m.decode() for m in await redis.smembers(keys.menu(report))}
    expected = [
        server.url("/reports/annual.pdf"),
        server.url("/files/summary.PDF"),
        server.url("/download?id=7"),
        server.url("/static/deck.pdf"),
    ]
    assert result["ok"] is True, result
    assert result["documents"] == expected
    assert set(expected) <= menu
    assert not any(("127.0.0.2" in u or "169.254" in u) for u in menu)
    assert annual["ok"] is True and annual["pages"] == 2


async def test_thousands_of_embeds_give_a_bounded_list(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    frames = "".join(f'<iframe src="/doc/{n}.pdf"></iframe>' for n in range(5000))
    body = f"<html><body><main><p>Many documents.</p>{frames}</main></body></html>"

    async def many(request: web.Request) -> web.Response:
        return web.Response(text=body, content_type="text/html")

    async with (
        serve({"/many": many}, ca.server_context()) as server,
        fetching(fetch_settings(settings, ca), token, report) as h,
    ):
        result = await h.client.fetch(report, server.url("/many"))
    assert result["documents"] == [server.url(f"/doc/{n}.pdf") for n in range(MAX_DOCUMENTS)]


async def test_a_kept_document_shed_between_its_lookup_and_its_read_is_served_again_not_an_error(
    settings: Settings,
    ca: TestCA,
    token: str,
    report: str,
    redis: aioredis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    requests: list[str] = []

    async def article(request: web.Request) -> web.Response:
        requests.append(request.path)
        return web.Response(text=ARTICLE, content_type="text/html")

    lookup = KeptDocuments.lookup_digest
    shed: list[str] = []

    async def shed_after_lookup(self: KeptDocuments, digest: str) -> object:
        kept = await lookup(self, digest)
        if kept is not None and not shed:
            shed.append(digest)
            await redis.delete(keys.document(digest))  # what Redis near full does to a document
        return kept

    async with (
        serve({"/notes": article}, ca.server_context()) as server,
        fetching(fetch_settings(settings, ca), token, report) as h,
    ):
        url = server.url("/notes")
        first = await h.client.fetch(report, url)
        monkeypatch.setattr(KeptDocuments, "lookup_digest", shed_after_lookup)
        hit = await h.client.fetch(f"{report}-2", url)
    assert first["ok"] is True and first["cached"] is False
    assert shed, "the second fetch read the kept document"
    assert hit["ok"] is True, hit
    assert hit["text"] == first["text"] and hit["format"] == "markdown"
    assert requests == ["/notes", "/notes"]  # fetched again, once
    assert int(await redis.hget(keys.budget(f"{report}-2"), "fetch") or 0) == 1
