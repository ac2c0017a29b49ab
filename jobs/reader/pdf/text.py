"""A PDF's bytes to the text its reader sees, page by page, with PDFium (through pypdfium2).

This runs inside a PDF child process (``jobs.reader.pdf.child``), never in the worker: PDFium is C
code fed hostile bytes, and it inflates streams whole. Pages are read in order until the text
reaches the character cap (pages after it are not even loaded) or the CPU budget is spent; text a
reader would not see is dropped by the rules in ``pdf_visibility`` and counted.

Most pages hide nothing, and cost one call for their text. Only a page with a hidden or
half-off-page text object is read character by character.
"""

from __future__ import annotations

import ctypes
import re
import time
from typing import TYPE_CHECKING

import pypdfium2 as pdfium
import pypdfium2.raw as raw

from jobs.reader.hidden import strip_invisible
from jobs.reader.metadata.xmp import declared
from jobs.reader.pdf import bindings as call
from jobs.reader.pdf.native import links as native_links
from jobs.reader.pdf.scan import PageScan
from jobs.reader.pdf.wire import PdfRefused, Reading, Refusal

MAX_TITLE = 1000
MAX_URIS_PER_PAGE = 1000
MAX_URIS = 5000  # the worker keeps at most 500 links; the rest are duplicates, http, or junk
# Characters sent past the cap: room for the worker's cut to back off a combining mark, and for a
# URL that straddles the cap to be read whole.
CUT_SLACK = 2048
MAX_URI_BYTES = 8192
_LINE_BREAKS = re.compile(r"\n{2,}")
_TRAILING_SPACE = re.compile(r"[ \t]+\n")

if TYPE_CHECKING:  # the OCR engine loads only in the child that reads a scan, not with the text reader
    from jobs.reader.ocr.run import OcrRun


def extract(
    body: bytes, *, max_chars: int, cpu_budget_s: float, ocr: OcrRun | None = None, from_page: int = 0
) -> Reading:
    """Read ``body`` until ``max_chars`` characters of text or ``cpu_budget_s`` of CPU time (OCR's
    time aside: ``ocr`` has its own budget), from page ``from_page`` (0: the first)."""
    started = time.process_time()
    document = _open(body)
    try:
        count = len(document)
        reading = Reading(
            pages=count, pages_read=0, title=_title(document), declared=declared(document, body)
        )
        length = uri_count = 0
        # Pages before ``from_page`` were read by an earlier request: their places are kept empty.
        reading.pages_read = min(from_page, count)
        reading.texts.extend([""] * reading.pages_read)
        reading.uris.extend([] for _ in range(reading.pages_read))
        for index in range(min(from_page, count), count):
            spent = time.process_time() - started - (ocr.spent_s if ocr is not None else 0.0)
            if spent > cpu_budget_s:
                reading.complete = False
                break
            page = _load(document, index)
            if page is None:
                reading.pages_read += 1
                reading.unreadable_pages += 1
                reading.texts.append("")
                reading.uris.append([])
                continue
            try:
                text, uris, scanned = _read_page(document, page, reading)
                if scanned and ocr is not None:
                    found = ocr.read_page(page, index + 1, reading)
                    if found is None:
                        # Past the OCR budget: the reading stops here, so a later one continues it.
                        reading.ocr_unread.append(index + 1)
                        break
                    text, invisible = strip_invisible(clean(found))
                    reading.hidden_removed += invisible
            finally:
                page.close()
            reading.pages_read += 1
            # The worker cuts the text at max_chars; what lies well past it need not cross the pipe.
            text = text[: max(0, max_chars + CUT_SLACK - length)]
            uris = uris[: max(0, MAX_URIS - uri_count)]
            uri_count += len(uris)
            reading.texts.append(text)
            reading.uris.append(uris)
            if text:
                length += len(text) + 2
            if length >= max_chars:
                break
        if count and reading.unreadable_pages and reading.unreadable_pages == reading.pages_read:
            raise PdfRefused(Refusal.DAMAGED)
        return reading
    finally:
        document.close()


def _open(body: bytes) -> pdfium.PdfDocument:
    try:
        return pdfium.PdfDocument(body)
    except pdfium.PdfiumError as error:
        if error.err_code == raw.FPDF_ERR_SUCCESS:
            # PDFium opened it and found no page: an empty document, read as empty.
            return pdfium.PdfDocument.new()
        if error.err_code == raw.FPDF_ERR_PASSWORD:
            raise PdfRefused(Refusal.PASSWORD) from None
        if error.err_code == raw.FPDF_ERR_SECURITY:
            raise PdfRefused(Refusal.SECURITY) from None
        raise PdfRefused(Refusal.DAMAGED) from None


def _load(document: pdfium.PdfDocument, index: int) -> pdfium.PdfPage | None:
    try:
        return document[index]
    except pdfium.PdfiumError:
        return None


def _title(document: pdfium.PdfDocument) -> str:
    title, _ = strip_invisible(document.get_metadata_value("Title"))
    return " ".join(title.split())[:MAX_TITLE]


def clean(text: str) -> str:
    """PDFium's page text with ordinary line ends, no trailing spaces and no blank lines: PDFium
    writes none itself, so one left where hidden text was dropped would only mark the gap (and a
    blank line is what separates pages)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _TRAILING_SPACE.sub("\n", text)
    return _LINE_BREAKS.sub("\n", text).strip()


def _read_page(
    document: pdfium.PdfDocument, page: pdfium.PdfPage, reading: Reading
) -> tuple[str, list[str], bool]:
    """The page's visible text, its link URIs, and whether it is a scan (images, no text layer)."""
    textpage = page.get_textpage()
    try:
        scan = PageScan(page)
        reading.images += scan.images
        count = raw.FPDFText_CountChars(textpage.raw)
        reading.characters += max(count, 0)
        scanned = count <= 0 and scan.images > 0
        if count <= 0:
            text = ""
        elif not scan.hidden and not scan.straddling:
            text = textpage.get_text_range(0, count)
        else:
            text, dropped = _visible_text(textpage, count, scan)
            reading.hidden_removed += dropped
    finally:
        textpage.close()
    text, invisible = strip_invisible(clean(text))
    reading.hidden_removed += invisible
    return text, _uris(document, page), scanned


def _visible_text(textpage: pdfium.PdfTextPage, count: int, scan: PageScan) -> tuple[str, int]:
    """The page's text without the characters of hidden objects, and how many were dropped."""
    runs: list[tuple[int, int]] = []
    dropped = 0
    start = None
    page, char_object, hidden, straddling = textpage.raw, call.char_object, scan.hidden, scan.straddling
    for index in range(count):
        address = char_object(page, index)  # None: a space or line break PDFium generated
        if address is None or (
            address not in hidden and (address not in straddling or _on_page(page, index, scan))
        ):
            if start is None:
                start = index
            continue
        dropped += 1
        if start is not None:
            runs.append((start, index - start))
            start = None
    if start is not None:
        runs.append((start, count - start))
    text = ""
    for first, length in runs:
        piece = textpage.get_text_range(first, length)
        # Dropped text usually sits between the spaces PDFium generated around it; when it does
        # not, a space keeps the words on either side apart.
        if text and piece and not text[-1].isspace() and not piece[0].isspace():
            text += " "
        text += piece
    return text, dropped


def _on_page(page: object, index: int, scan: PageScan) -> bool:
    """Whether the centre of character ``index`` (of an object that straddles the edge) is on it."""
    box = _CHAR_BOX
    call.char_box(page, index, *_CHAR_BOX_REFS)  # left, right, bottom, top
    return scan.visible_box.contains((box[0] + box[1]) / 2, (box[2] + box[3]) / 2)


def _uris(document: pdfium.PdfDocument, page: pdfium.PdfPage) -> list[str]:
    """The URIs of the page's link annotations, in annotation order (other actions are skipped).
    The URI is 7-bit ASCII by the standard; anything else is read byte for byte (Latin-1)."""
    return native_links(call.address(page.raw), call.address(document.raw), MAX_URIS_PER_PAGE, MAX_URI_BYTES)


_CHAR_BOX = (ctypes.c_double * 4)()
_CHAR_BOX_REFS = tuple(ctypes.byref(_CHAR_BOX, 8 * i) for i in range(4))
