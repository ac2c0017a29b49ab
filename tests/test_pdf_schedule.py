"""PDFs cannot starve pages (issue 24, class 2): a PDF never takes the worker's CPU slots or its
express lane, and the PDF pool seats the site whose PDFs have cost least lately, not the smallest
file. (The latency under a flood of costly PDFs is a benchmark: bench/hostile_load.py --scenario pdf.)
"""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.reader.document import reads_in_child
from jobs.reader.pdf.schedule import CostQueue
from tests.support.fetching import fetch_settings
from tests.support.pdfs import busy_pdf, text_pdf
from tests.support.tls import TestCA, serve
from tests.test_page_cache import worker_and_client
from worker.config import Settings
from worker.runtime.cpu_slots import EXPRESS_SLOTS, Lane

PDF_TYPES = st.sampled_from(["application/pdf", "Application/PDF; charset=binary", None])


@given(content_type=PDF_TYPES, pages=st.integers(1, 3))
def test_a_pdf_declared_or_sniffed_is_read_in_the_child(content_type: str | None, pages: int) -> None:
    assert reads_in_child(text_pdf(*["words"] * pages), content_type) is True


# What an undeclared body is read whole in the child as: a PDF, an image OCR reads, an office zip.
CHILD_SIGNATURES = (b"%PDF", b"PK\x03\x04", b"\x89PNG", b"\xff\xd8\xff", b"GIF87a", b"GIF89a", b"RIFF")


@given(
    body=st.binary(max_size=200).filter(lambda b: not b.lstrip().startswith(CHILD_SIGNATURES)),
    content_type=st.sampled_from(["text/html", "text/plain; charset=utf-8", "image/bmp", None]),
)
def test_anything_else_is_not_read_in_the_child(body: bytes, content_type: str | None) -> None:
    assert reads_in_child(body, content_type) is False


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"", "image/png"),
        (b"", "application/vnd.oasis.opendocument.text"),
        (b"\x89PNG\r\n\x1a\n rest", None),
        (b"PK\x03\x04 rest", None),
    ],
)
def test_images_and_office_documents_are_read_in_the_child(body: bytes, content_type: str | None) -> None:
    assert reads_in_child(body, content_type) is True


async def holding(queue: CostQueue, site: str, seconds: float, log: list[str], peak: list[int]) -> None:
    async with queue.seat(site):
        log.append(site)
        peak.append(peak[-1] + 1 if peak else 1)
        await asyncio.sleep(seconds)
        peak.append(peak[-1] - 1)


@settings(max_examples=25, deadline=None)
@given(seats=st.integers(1, 3), sites=st.lists(st.sampled_from("abcd"), min_size=1, max_size=10))
def test_never_more_readings_at_once_than_seats_and_every_one_is_seated(seats: int, sites: list[str]) -> None:
    async def run() -> tuple[list[str], list[int]]:
        queue = CostQueue(seats)
        log: list[str] = []
        peak: list[int] = []
        await asyncio.gather(*(holding(queue, site, 0.001, log, peak) for site in sites))
        return log, peak

    log, peak = asyncio.run(run())
    assert sorted(log) == sorted(sites)
    assert max(peak) <= seats


@settings(max_examples=8, deadline=None)
@given(costly=st.integers(2, 6), cheap=st.integers(1, 3))
def test_a_cheap_site_is_seated_before_a_costly_site_that_came_first(costly: int, cheap: int) -> None:
    async def run() -> list[str]:
        queue = CostQueue(1)
        log: list[str] = []
        peak: list[int] = []
        # The costly site has already spent time in the pool; all its PDFs queue first.
        await holding(queue, "costly.example", 0.05, log, peak)
        log.clear()
        first = asyncio.create_task(holding(queue, "costly.example", 0.02, log, peak))
        await asyncio.sleep(0)
        queued = [
            asyncio.create_task(holding(queue, "costly.example", 0.02, log, peak)) for _ in range(costly)
        ]
        await asyncio.sleep(0)
        cheap_ones = [
            asyncio.create_task(holding(queue, "cheap.example", 0.001, log, peak)) for _ in range(cheap)
        ]
        await asyncio.gather(first, *queued, *cheap_ones)
        return log

    log = asyncio.run(run())
    # The first costly PDF had the seat already; every cheap one goes before the costly ones queued.
    assert log[: 1 + cheap] == ["costly.example"] + ["cheap.example"] * cheap


def test_among_sites_of_equal_cost_the_oldest_waiter_goes_first() -> None:
    async def run() -> list[str]:
        queue = CostQueue(1)
        log: list[str] = []
        peak: list[int] = []
        tasks = []
        for site in ["a", "b", "c", "d"]:
            tasks.append(asyncio.create_task(holding(queue, site, 0.0, log, peak)))
            await asyncio.sleep(0)
        await asyncio.gather(*tasks)
        return log

    assert asyncio.run(run()) == ["a", "b", "c", "d"]


def test_a_waiter_cancelled_gives_its_turn_to_the_next() -> None:
    async def run() -> list[str]:
        queue = CostQueue(1)
        log: list[str] = []
        peak: list[int] = []
        holder = asyncio.create_task(holding(queue, "a", 0.05, log, peak))
        await asyncio.sleep(0)
        gone = asyncio.create_task(holding(queue, "b", 0.0, log, peak))
        after = asyncio.create_task(holding(queue, "c", 0.0, log, peak))
        await asyncio.sleep(0.01)
        gone.cancel()
        await asyncio.gather(holder, after)
        return log

    assert asyncio.run(run()) == ["a", "c"]


async def test_pdfs_being_read_hold_none_of_the_workers_cpu_slots_nor_its_express_lane(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    costly = busy_pdf(pages=4, mib=3)  # a few KB that keep PDFium busy for a while

    async def pdf(request: web.Request) -> web.Response:
        return web.Response(body=costly, content_type="application/pdf")

    seen: list[tuple[int, int]] = []
    async with (
        serve({"/{p:.*}": pdf}, ca.server_context()) as server,
        worker_and_client(fetch_settings(settings, ca, cache_ttl_s=0), token) as (worker, client),
    ):
        assert worker.runtime is not None
        slots = worker.runtime.cpu_slots
        general = slots.free(Lane.GENERAL)
        jobs = [
            asyncio.create_task(client.fetch(f"{report}-{i}", server.url(f"/doc{i}.pdf", name="site.test")))
            for i in range(3)
        ]
        while not all(job.done() for job in jobs):
            seen.append((slots.free(Lane.GENERAL), slots.free(Lane.EXPRESS)))
            await asyncio.sleep(0.02)
        results = [job.result() for job in jobs]
    assert all(r["ok"] and r["content_type"] == "application/pdf" for r in results), results
    assert len(seen) > 5  # the PDFs were read while the slots were watched
    assert set(seen) == {(general, EXPRESS_SLOTS)}
