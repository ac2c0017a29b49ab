"""Nothing cut by time is cached (issue 24, class 3): a reduction stopped by its CPU budget or the
job's deadline is served to its own job only; a page cut by the byte or character caps, which every
worker would cut the same way, is kept like a complete one."""

from __future__ import annotations

import asyncio

from aiohttp import web
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from jobs.reader.document import build_document
from tests.support.fetching import fetch_settings
from tests.support.pdfs import many_pages_pdf
from tests.support.tls import TestCA, serve
from tests.test_page_cache import worker_and_client
from worker.config import Settings

URL = "https://site.test/page"


def article(paragraphs: int) -> bytes:
    body = "".join(
        f"<p>Paragraph {n} of the article, with words enough to read.</p>" for n in range(paragraphs)
    )
    return f"<html><body><main>{body}</main></body></html>".encode()


def text_body(lines: int) -> bytes:
    return "".join(f"line {n} of a plain text body\n" for n in range(lines)).encode()


async def read(body: bytes, content_type: str, **limits: object) -> object:
    options: dict[str, object] = {"max_chars": 40_000, "cpu_budget_s": 3.0, "body_truncated": False}
    options.update(limits)
    return await build_document(body, content_type, URL, extract="main", **options)  # type: ignore[arg-type]


@hypothesis_settings(max_examples=20, deadline=None)
@given(kind=st.sampled_from(["text/html", "text/plain"]), size=st.integers(3_000, 6_000))
def test_a_reading_stopped_by_its_cpu_budget_is_out_of_time(kind: str, size: int) -> None:
    body = article(size) if kind == "text/html" else text_body(size * 10)
    document = asyncio.run(read(body, kind, cpu_budget_s=0.0005))
    assert document.truncated is True  # type: ignore[attr-defined]
    assert document.out_of_time is True  # type: ignore[attr-defined]


@hypothesis_settings(max_examples=20, deadline=None)
@given(
    kind=st.sampled_from(["text/html", "text/plain"]),
    cut=st.sampled_from(["chars", "bytes", "none"]),
    size=st.integers(5, 200),
)
def test_a_page_cut_by_a_cap_or_not_cut_is_not_out_of_time(kind: str, cut: str, size: int) -> None:
    body = article(size) if kind == "text/html" else text_body(size)
    limits: dict[str, object] = {}
    if cut == "chars":
        limits["max_chars"] = 50
    if cut == "bytes":
        limits["body_truncated"] = True
    document = asyncio.run(read(body, kind, **limits))
    assert document.out_of_time is False  # type: ignore[attr-defined]
    assert document.truncated is (cut != "none")  # type: ignore[attr-defined]


async def _fetch_twice(
    settings: Settings, ca: TestCA, token: str, report: str, body: bytes
) -> tuple[dict, dict, int]:  # type: ignore[type-arg]
    hits = 0

    async def page(request: web.Request) -> web.Response:
        nonlocal hits
        hits += 1
        return web.Response(body=body, content_type="text/html")

    async with (
        serve({"/page": page}, ca.server_context()) as server,
        worker_and_client(settings, token) as (_, client),
    ):
        url = server.url("/page", name="site.test")
        first = await client.fetch(report, url)
        second = await client.fetch(f"{report}-2", url)
    return first, second, hits


async def test_a_page_cut_by_cpu_time_is_fetched_again_by_the_next_report(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    busy = fetch_settings(settings, ca, reduce_cpu_budget_s=0.001)
    first, second, hits = await _fetch_twice(busy, ca, token, report, article(8_000))
    assert first["ok"] is True and first["truncated"] is True, first
    assert second["cached"] is False
    assert hits == 2


async def test_a_page_longer_than_one_piece_is_shared(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    # The character cap is the size of a piece, the same for every worker: the page is whole, read
    # on by offsets, and as shareable as any.
    capped = fetch_settings(settings, ca, fetch_max_chars=200)
    first, second, hits = await _fetch_twice(capped, ca, token, report, article(200))
    assert first["truncated"] is False, first
    assert first["next_offset"] is not None and first["total_chars"] > 200
    assert second["cached"] is True
    assert second["text"] == first["text"]
    assert hits == 1


def test_a_pdf_read_until_its_cpu_budget_is_out_of_time_and_one_cut_at_the_cap_is_not() -> None:
    pdf = many_pages_pdf(60)
    by_time = asyncio.run(read(pdf, "application/pdf", cpu_budget_s=0.0001))
    by_cap = asyncio.run(read(pdf, "application/pdf", max_chars=100))
    assert by_time.truncated is True and by_time.out_of_time is True  # type: ignore[attr-defined]
    assert by_cap.truncated is True and by_cap.out_of_time is False  # type: ignore[attr-defined]
