"""Scans and images through a real worker: OCR'd on the first fetch as far as it may go, read on
by a later find or piece, charged to the report's OCR budget, and never fetched twice.

A local TLS server serves a three-page scan (no text layer) and a PNG, and counts the requests
that reach it. The text drawn on each page (tests/support/scans.py) is the oracle.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import redis.asyncio as aioredis
from aiohttp import web

from jobs.reader.ocr import ask
from tests.support.fetching import FetchHarness, fetch_settings, fetching
from tests.support.scans import image_bytes, page_image, scanned_pdf
from tests.support.tls import TestCA, serve
from worker.config import Settings
from worker.state import keys

PHRASE = "Resolution appointing the auditor"
LINES = [
    ["Page one of the filing", "Company registry extract"],
    ["Page two of the filing", "Minutes of the board meeting"],
    ["Page three of the filing", PHRASE],
]
SCAN = scanned_pdf([page_image(lines) for lines in LINES])
PNG = image_bytes(page_image(["Certificate of incorporation", "Example Holdings Limited"]), "PNG")


@asynccontextmanager
async def scans(
    settings: Settings, ca: TestCA, token: str, report: str, **changes: Any
) -> AsyncIterator[tuple[FetchHarness, str, str, list[str]]]:
    requests: list[str] = []

    async def scan(request: web.Request) -> web.Response:
        requests.append(request.path)
        return web.Response(body=SCAN, content_type="application/pdf")

    async def png(request: web.Request) -> web.Response:
        requests.append(request.path)
        return web.Response(body=PNG, content_type="image/png")

    # OCR under a loaded test machine is slow: a generous deadline, so pages are not cut by time.
    changes.setdefault("fetch_timeout_s", 40.0)
    async with serve({"/scan.pdf": scan, "/cert.png": png}, ca.server_context()) as server:
        async with fetching(fetch_settings(settings, ca, **changes), token, report) as h:
            yield h, server.url("/scan.pdf"), server.url("/cert.png"), requests


async def ocr_pages_charged(redis: aioredis.Redis, report: str) -> int:
    return int(await redis.hget(keys.budget(report), "ocr_pages") or 0)


async def test_an_image_is_read_by_ocr_with_its_ocr_note(
    settings: Settings, ca: TestCA, token: str, report: str, redis: aioredis.Redis
) -> None:
    async with scans(settings, ca, token, report) as (h, _, png_url, _requests):
        result = await h.client.fetch(report, png_url, extract="full")
    assert result["ok"] is True, result
    assert "Certificate of incorporation" in result["text"]
    assert result["content_type"] == "image/png"
    assert result["ocr"]["pages"] == [1] and result["ocr"]["languages"] == "eng"
    assert result["ocr"]["engine"].startswith("tesseract")
    assert await ocr_pages_charged(redis, report) == 1


async def test_a_find_past_the_pages_the_first_fetch_read_reads_on_and_finds_its_page(
    settings: Settings,
    ca: TestCA,
    token: str,
    report: str,
    redis: aioredis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A first fetch that may OCR two pages: as when its deadline lets it read only so many.
    monkeypatch.setattr(ask, "MAX_PAGES_PER_READ", 2)
    async with scans(settings, ca, token, report) as (h, scan_url, _, requests):
        first = await h.client.fetch(report, scan_url, extract="full", format="text")
        found = await h.client.fetch(report, scan_url, extract="full", format="text", find=PHRASE.lower())
        whole = await h.client.fetch(report, scan_url, extract="full", format="text", offset=1)
    assert first["ok"] is True, first
    assert first["ocr"]["pages"] == [1, 2]
    assert first["ocr"]["unread_from"] == 3 and first["truncated"] is True
    assert "Company registry extract" in first["text"] and "auditor" not in first["text"]
    assert found["ok"] is True, found
    [match] = found["matches"]
    offsets = found["page_offsets"]
    assert len(offsets) == 3 and offsets[2] <= match["offset"]  # on page 3
    assert found["ocr"]["pages"] == [1, 2, 3] and "unread_from" not in found["ocr"]
    assert PHRASE in whole["text"]  # the pieces read the longer document now kept
    assert requests == ["/scan.pdf"]  # read on from the kept scan: never fetched again
    assert await ocr_pages_charged(redis, report) == 3


async def test_past_the_ocr_budget_the_result_says_so(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    async with scans(settings, ca, token, report, ocr_budget_pages=1) as (h, scan_url, _, _requests):
        first = await h.client.fetch(report, scan_url, extract="full")
        found = await h.client.fetch(report, scan_url, extract="full", find="auditor")
    assert first["ocr"]["pages"] == [1]
    assert first["ocr"]["stopped"] == "ocr_budget" and first["ocr"]["unread_from"] == 2
    assert found["ok"] is True and found["matches"] == []
    assert found["ocr"]["stopped"] == "ocr_budget"
