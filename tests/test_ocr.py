"""OCR of scans and images, in the PDF child: what Tesseract reads, what it never reads, and
what it refuses. The oracle is the text the test drew on the page (tests/support/scans.py)."""

from __future__ import annotations

import struct
import time
import zlib
from typing import Any

import pytest

from jobs.reader.document import build_document
from jobs.reader.ocr.ask import MAX_PAGES_PER_READ, OcrAsk
from tests.support.pdfs import text_pdf
from tests.support.scans import image_bytes, page_image, scanned_pdf, sentences
from worker.errors import UnsupportedContentType


class Budget:
    """A report's OCR budget in memory: what reserve and refund do to it is checked here."""

    def __init__(self, pages: int) -> None:
        self.left = pages

    async def reserve(self, wanted: int) -> int:
        granted = min(wanted, self.left)
        self.left -= granted
        return granted

    async def refund(self, pages: int) -> None:
        self.left += pages

    def ask(self) -> OcrAsk:
        return OcrAsk("eng", self.reserve, self.refund)


async def read(body: bytes, content_type: str | None, ocr: OcrAsk | None) -> Any:
    return await build_document(
        body,
        content_type,
        "https://example.org/scan",
        extract="full",
        max_chars=200_000,
        cpu_budget_s=3.0,
        body_truncated=False,
        ocr=ocr,
    )


def words_recalled(expected: list[str], text: str) -> float:
    wanted = " ".join(expected).lower().split()
    seen = set(text.lower().split())
    return sum(word in seen for word in wanted) / len(wanted)


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "TIFF", "WEBP", "GIF"])
async def test_an_image_fetched_directly_is_read_by_ocr(fmt: str) -> None:
    lines = sentences(7, 6)
    budget = Budget(10)
    document = await read(image_bytes(page_image(lines), fmt), f"image/{fmt.lower()}", budget.ask())
    assert words_recalled(lines, document.text) >= 0.95
    assert document.ocr is not None
    assert document.ocr["pages"] == [1]
    assert document.ocr["engine"].startswith("tesseract ")
    assert document.ocr["languages"] == "eng"
    assert 50 <= document.ocr["mean_confidence"] <= 100
    assert budget.left == 9  # one page charged, the rest of the reservation given back


async def test_a_scanned_pdf_is_read_page_by_page_with_its_page_offsets() -> None:
    first, second = sentences(1, 8), sentences(2, 8)
    body = scanned_pdf([page_image(first), page_image(second, rotate=0.7)])
    document = await read(body, "application/pdf", Budget(10).ask())
    assert document.ocr is not None and document.ocr["pages"] == [1, 2]
    one, two = document.readable.pages
    assert words_recalled(first, one) >= 0.95 and words_recalled(second, two) >= 0.9


async def test_a_page_with_a_text_layer_is_never_ocrd() -> None:
    budget = Budget(10)
    document = await read(text_pdf("Born digital text."), "application/pdf", budget.ask())
    assert document.ocr is None
    assert budget.left == 10
    assert "Born digital text." in document.text


async def test_past_the_reports_ocr_budget_the_result_says_where_it_stopped_and_why() -> None:
    body = scanned_pdf([page_image(sentences(1, 4)), page_image(sentences(2, 4))])
    budget = Budget(1)
    document = await read(body, "application/pdf", budget.ask())
    assert document.ocr is not None
    assert document.ocr["pages"] == [1]
    assert document.ocr["unread_from"] == 2 and document.ocr["stopped"] == "ocr_budget"
    assert document.truncated and document.out_of_time  # not shared with other reports
    assert budget.left == 0
    with pytest.raises(UnsupportedContentType, match="OCR budget"):
        await read(body, "application/pdf", budget.ask())


async def test_with_ocr_off_an_image_is_refused_and_a_scan_has_no_text_layer() -> None:
    with pytest.raises(UnsupportedContentType, match="OCR off"):
        await read(image_bytes(page_image(["Hello"]), "PNG"), "image/png", None)
    with pytest.raises(UnsupportedContentType, match="no text layer"):
        await read(scanned_pdf([page_image(["Hello"])]), "application/pdf", None)


def png_declaring(width: int, height: int) -> bytes:
    """A PNG whose header declares width x height, with one tiny IDAT: decoding it would need
    width * height bytes, reading its header a few."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\0" * 64))
        + chunk(b"IEND", b"")
    )


async def test_an_image_declaring_fifty_thousand_pixels_square_is_refused_before_decoding() -> None:
    started = time.monotonic()
    with pytest.raises(UnsupportedContentType, match="more pixels than the reader's bound"):
        await read(png_declaring(50_000, 50_000), "image/png", Budget(10).ask())
    assert time.monotonic() - started < 20


async def test_a_damaged_image_is_refused_by_name() -> None:
    with pytest.raises(UnsupportedContentType, match="image is damaged"):
        await read(b"\x89PNG\r\n\x1a\n" + b"\x00" * 40, "image/png", Budget(10).ask())


def test_a_read_reserves_no_more_than_its_share() -> None:
    assert 0 < MAX_PAGES_PER_READ <= 200


@pytest.mark.parametrize(
    "content_type",
    [
        "image/png",
        "IMAGE/JPEG; q=1",
        "image/tiff",
        "image/webp",
        "image/gif",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "application/vnd.oasis.opendocument.spreadsheet",
    ],
)
def test_images_and_office_types_are_read_whole_like_a_pdf(content_type: str) -> None:
    from jobs.reader.content_types import DeclaredKind, declared_kind

    assert declared_kind(content_type) is DeclaredKind.DOCUMENT


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "GIF", "WEBP"])
async def test_an_undeclared_image_is_sniffed_and_read(fmt: str) -> None:
    lines = ["Sniffed image text"]
    document = await read(image_bytes(page_image(lines), fmt), None, Budget(5).ask())
    assert "Sniffed image text" in document.text
