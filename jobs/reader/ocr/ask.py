"""The worker's side of OCR: what one read may spend, and what its result says of it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from jobs.reader.pdf.wire import Reading
from worker.document_notes import OcrNote
from worker.state.budget import OcrBudget

# Reserves up to the pages asked for from the report's OCR budget and returns how many it got;
# ``refund`` gives back those a read did not use.
Reserve = Callable[[int], Awaitable[int]]
Refund = Callable[[int], Awaitable[None]]
# A read reserves this many pages at most (and gives back what it did not use): more than a
# fetch's deadline lets OCR read, few enough that two scans of one report read side by side.
MAX_PAGES_PER_READ = 40


@dataclass(frozen=True)
class OcrAsk:
    """OCR for one read: the worker's languages, and the report's budget to charge."""

    languages: str
    reserve: Reserve
    refund: Refund
    pages_per_read: int = MAX_PAGES_PER_READ


def note(
    reading: Reading, languages: str, granted: int, per_read: int = MAX_PAGES_PER_READ
) -> OcrNote | None:
    """The result's ``ocr``, when OCR read a page or stopped before one."""
    if not reading.ocr_pages and not reading.ocr_unread:
        return None
    confidences = reading.ocr_confidence
    found = OcrNote(
        pages=list(reading.ocr_pages),
        engine=reading.ocr_engine or "tesseract",
        languages=languages,
        mean_confidence=round(sum(confidences) / len(confidences), 1) if confidences else 0.0,
    )
    if reading.ocr_unread:
        found["unread_from"] = reading.ocr_unread[0]
        spent = granted < per_read and len(reading.ocr_pages) >= granted
        found["stopped"] = "ocr_budget" if spent else "time"
    return found


def unread_message(found: OcrNote) -> str:
    """What the text says where it ends early (the agent reads the text, not only the fields)."""
    if found.get("stopped") == "ocr_budget":
        why = "this report has used its OCR budget (RESEARCH_OCR_BUDGET_PAGES)"
    else:
        why = "OCR ran out of this fetch's time"
    return f"[Pages from {found.get('unread_from')} on were not read: {why}.]"


def for_report(budget: OcrBudget, report_id: str, *, enabled: bool, languages: str) -> OcrAsk | None:
    """The OCR a fetch for ``report_id`` may do: None with OCR off."""
    if not enabled:
        return None

    async def reserve(wanted: int) -> int:
        return await budget.reserve(report_id, wanted)

    async def refund(pages: int) -> None:
        await budget.refund(report_id, pages)

    return OcrAsk(languages, reserve, refund, MAX_PAGES_PER_READ)
