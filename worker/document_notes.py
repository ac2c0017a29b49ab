"""What a fetch_page result says about how a document was read: its ``ocr`` and its ``refused``.

The reader builds these (jobs/reader/ocr, jobs/reader/office); the page cache keeps them and reads
them back here, checked value by value, since Redis is shared state: a value of the wrong shape is
no note at all (a miss), never an exception.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

MAX_PAGES = 5000
MAX_REFUSED = 20
MAX_REFUSED_CHARS = 500


class OcrNote(TypedDict):
    """``ocr``: which pages OCR read, with what, and how sure it was."""

    pages: list[int]  # page numbers (from 1) whose text is OCR's
    engine: str  # "tesseract 5.5.4"
    languages: str  # Tesseract's codes, "+"-joined: "eng", "eng+deu"
    mean_confidence: float  # the mean of the pages' mean word confidence, 0 to 100
    # The first page OCR did not reach, and why ("ocr_budget": the report's OCR pages are spent;
    # "time": the fetch's deadline): the text ends before that page.
    unread_from: NotRequired[int]
    stopped: NotRequired[str]


def parse_ocr(value: object) -> OcrNote | None:
    if not isinstance(value, dict):
        return None
    pages, engine = value.get("pages"), value.get("engine")
    languages, confidence = value.get("languages"), value.get("mean_confidence")
    if not (
        isinstance(pages, list)
        and len(pages) <= MAX_PAGES
        and all(isinstance(p, int) and not isinstance(p, bool) and p > 0 for p in pages)
        and isinstance(engine, str)
        and isinstance(languages, str)
        and isinstance(confidence, int | float)
        and not isinstance(confidence, bool)
    ):
        return None
    note = OcrNote(pages=pages, engine=engine, languages=languages, mean_confidence=float(confidence))
    unread, stopped = value.get("unread_from"), value.get("stopped")
    if isinstance(unread, int) and not isinstance(unread, bool) and isinstance(stopped, str):
        note["unread_from"] = unread
        note["stopped"] = stopped
    return note


def parse_refused(value: object) -> tuple[str, ...] | None:
    if not isinstance(value, list) or len(value) > MAX_REFUSED:
        return None
    if not all(isinstance(item, str) and len(item) <= MAX_REFUSED_CHARS for item in value):
        return None
    return tuple(value)
