"""One document's OCR inside the PDF child: which pages it reads, and what that cost.

A page is read by OCR only when it has no text layer at all and shows an image (a scan); a page
with any text is never OCR'd. A run reads at most ``pages`` pages (what is left of the report's
OCR budget) within ``budget_s`` seconds of the clock (the job's deadline is a time on the clock,
and a loaded machine gives OCR less than a core); the first page it cannot read stops the document's
reading there, so what was read is always a prefix of the document and a later read that starts
at that page (``from_page``) continues it exactly.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pypdfium2 as pdfium
from PIL import Image

from jobs.reader.ocr.engine import Engine, PageText
from jobs.reader.ocr.pictures import Picture, image_frames, render_page
from jobs.reader.pdf.wire import Reading

# One page's bound (Tesseract's own deadline): a letter page of dense text takes 1 to 3 s of CPU.
PAGE_DEADLINE_S = 30.0
# A page is not started with less time than this left: it would be cancelled, its work lost.
MIN_PAGE_S = 1.0


class OcrRun:
    """The OCR one request may do: a page count and a CPU-time budget."""

    def __init__(self, engine: Engine, pages: int, budget_s: float) -> None:
        self.engine = engine
        self.pages_left = pages
        self.until = time.monotonic() + budget_s
        self.spent_s = 0.0  # CPU time OCR used, which the text layer's budget does not pay for
        self.longest_s = 0.0  # the longest a page took, on the clock: the next may take as long

    def may_read(self) -> bool:
        """Pages are left, and time for one more: a page started without it would be cancelled
        (its work lost) or run past the job's deadline while Tesseract lays the page out."""
        return self.pages_left > 0 and self.until - time.monotonic() >= max(MIN_PAGE_S, self.longest_s)

    def read_page(self, page: pdfium.PdfPage, number: int, reading: Reading) -> str | None:
        """The page's text by OCR; None when the budget (pages or time) does not reach it."""
        if not self.may_read():
            return None
        started = time.process_time()
        try:
            found = self._read(render_page(page))
        finally:
            self.spent_s += time.process_time() - started
        if not found.complete:
            return None
        self.pages_left -= 1
        reading.ocr_pages.append(number)
        reading.ocr_confidence.append(round(found.confidence, 1))
        reading.ocr_engine = self.engine.name
        return found.text

    def read_images(self, image: Image.Image, reading: Reading, from_page: int) -> Iterator[str]:
        """Each frame's text, in order from ``from_page``, while the budget lasts."""
        for index, picture in enumerate(image_frames(image)):
            if index < from_page:
                continue
            number = index + 1
            if not self.may_read():
                reading.ocr_unread.append(number)
                return
            started = time.process_time()
            try:
                found = self._read(picture)
            finally:
                self.spent_s += time.process_time() - started
            if not found.complete:
                reading.ocr_unread.append(number)
                return
            self.pages_left -= 1
            reading.ocr_pages.append(number)
            reading.ocr_confidence.append(round(found.confidence, 1))
            reading.ocr_engine = self.engine.name
            yield found.text

    def _read(self, picture: Picture) -> PageText:
        started = time.monotonic()
        deadline = min(PAGE_DEADLINE_S, max(MIN_PAGE_S, self.until - started))
        found = self.engine.read(picture.image, dpi=picture.dpi, deadline_s=deadline)
        self.longest_s = max(self.longest_s, time.monotonic() - started)
        return found
