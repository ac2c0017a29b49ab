"""A PDF body to what its result holds: text, title, links to harvest, hidden-text count, pages.

The reading itself happens in a child process (``pdf_pool``, ``pdf_child``, ``pdf_text``); this
module turns the child's answer into a ``PdfText`` (``document.py`` makes it the same Document a
page becomes), and every way a PDF cannot be read into an ``unsupported_content_type`` refusal
whose message says why: a password, an encryption scheme, damage, no text layer, or the limit the
reading hit. A PDF whose text layer is present but empty is not refused: it is read as empty text.

The text is the pages' text in reading order with a blank line between pages; the title is the
document's metadata title, or else its first line; the links are the URIs of its link annotations
and the https URLs written in its text, page by page (document.py keeps the https ones, canonical).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from jobs.reader.links import urls_in_text
from jobs.reader.ocr.ask import OcrAsk, note
from jobs.reader.pdf.pool import ChildFailed, Failure, Limits, default_pool
from jobs.reader.pdf.wire import Kind, Options, Reading, Refusal
from worker.document_notes import OcrNote
from worker.errors import UnsupportedContentType
from worker.logs import fields
from worker.tracing import phases

log = logging.getLogger("research.pdf")

MAX_TITLE_FROM_TEXT = 200
# OCR's CPU time for one read when no deadline shortens it (the job's deadline always does).
MAX_OCR_S = 300.0
MIB = 1024 * 1024

REFUSALS = {
    Refusal.PASSWORD: "the PDF is protected by a password, so its text cannot be read",
    Refusal.SECURITY: "the PDF is encrypted with a scheme this reader does not support",
    Refusal.DAMAGED: "the PDF is damaged or is not a PDF: its structure could not be parsed",
    Refusal.IMAGE_DAMAGED: "the image is damaged or is not a PNG, JPEG, TIFF, WebP or GIF image",
    Refusal.IMAGE_TOO_LARGE: (
        "the image declares more pixels than the reader's bound (40 megapixels); it was not decoded"
    ),
    Refusal.OCR_OFF: "the body is an image, and this deployment has OCR off (RESEARCH_OCR=off)",
    Refusal.OFFICE_DAMAGED: "the office document is damaged or is not a DOCX, XLSX, PPTX, ODT, ODS or ODP",
    Refusal.ZIP_BOMB: (
        "zip_bomb: a member of the document's archive inflates past the reader's bound (ratio "
        "100:1 past 1 MiB, 64 MiB a member, 200 MiB in all); it was not opened"
    ),
    Refusal.XML_ENTITIES: (
        "xml_entities: the document's XML declares a DTD or entities (an entity expansion); it was not opened"
    ),
}


@dataclass(frozen=True)
class PdfText:
    """What a PDF gives the result; document.py cuts the text and resolves the links."""

    title: str  # the metadata title, or else the first line of text
    text: str  # the pages' text, a blank line between pages; a little past the cap at most
    hrefs: list[str]  # link-annotation URIs and URLs written in the text, page by page
    hidden_removed: int
    pages: int
    pages_read: int  # pages whose text was extracted
    stopped_early: bool  # pages were left unread (cap, CPU budget) or could not be loaded
    out_of_time: bool = False  # pages were left unread because the CPU budget ran out
    page_texts: tuple[str, ...] = ()  # each page's text, in order, empty pages included
    declared: dict[str, list[str]] = field(
        default_factory=dict
    )  # the information dictionary's and XMP's values, raw
    ocr: OcrNote | None = None  # the pages OCR read, when it read any (or stopped before one)
    markdown: str = ""  # an office document's Markdown
    refused: tuple[str, ...] = ()  # an office document's hazards, ignored


async def read_pdf(
    body: bytes,
    *,
    max_chars: int,
    cpu_budget_s: float,
    cost_key: str = "",
    until: float | None = None,
    ocr: OcrAsk | None = None,
    kind: Kind = Kind.PDF,
    from_page: int = 0,
) -> PdfText:
    """Raise UnsupportedContentType, with the reason in the message, when the PDF cannot be read.

    ``cost_key`` (the site) is what the pool charges the reading's time to; ``until`` (loop time)
    shortens the budget of a PDF that waited for a child. With ``ocr``, pages with no text layer
    (and an image, ``kind`` IMAGE) are read by OCR, charged to the report's OCR budget."""
    granted = await ocr.reserve(ocr.pages_per_read) if ocr is not None else 0
    options = Options(
        kind=kind, ocr_pages=granted, ocr_budget_s=MAX_OCR_S if granted else 0.0, from_page=from_page
    )
    reply: Reading | Refusal | None = None
    started_ns = phases.now_ns()
    try:
        reply = await default_pool().read(
            body,
            max_chars=max_chars,
            cpu_budget_s=cpu_budget_s,
            cost_key=cost_key,
            until=until,
            options=options,
            languages=ocr.languages if ocr is not None else "",
        )
    except ChildFailed as failed:
        # For operators: a run of these is a bomb campaign, or a PDFium bug worth reporting.
        log.warning("a PDF child failed", extra=fields(failure=failed.failure.value, bytes=len(body)))
        raise UnsupportedContentType(failure_message(failed.failure, failed.limits)) from None
    finally:
        used = len(reply.ocr_pages) if isinstance(reply, Reading) else 0
        if used:  # the job's OCR phase (worker/tracing): the child's reading, scan pages and all
            phases.record(phases.OCR, started_ns)
        if ocr is not None and granted:
            await ocr.refund(granted - used)
    if isinstance(reply, Refusal):
        raise UnsupportedContentType(REFUSALS[reply])
    if kind is Kind.IMAGE and not reply.ocr_pages and reply.ocr_unread:
        raise UnsupportedContentType(
            "the image was not read: this report has used its OCR budget (RESEARCH_OCR_BUDGET_PAGES)"
            if not granted
            else "the image was not read: OCR ran out of this fetch's time"
        )
    ocr_note = note(reply, ocr.languages, granted, ocr.pages_per_read) if ocr is not None else None
    if kind is Kind.PDF and reply.characters == 0 and reply.images > 0 and not reply.ocr_pages:
        if ocr_note is not None and ocr_note.get("stopped") == "ocr_budget":
            raise UnsupportedContentType(
                "the PDF has no text layer (a scan), and this report has used its OCR budget "
                "(RESEARCH_OCR_BUDGET_PAGES), so it was not read"
            )
        raise UnsupportedContentType(
            "the PDF has no text layer: its pages are images only (a scan without OCR), so there is "
            "no text to read"
        )
    text = "\n\n".join(page for page in reply.texts if page)
    return PdfText(
        title=reply.title or first_line(text),
        text=text,
        hrefs=_hrefs(reply),
        hidden_removed=reply.hidden_removed,
        pages=reply.pages,
        pages_read=reply.pages_read - reply.unreadable_pages,
        stopped_early=_stopped_early(reply),
        out_of_time=not reply.complete,
        page_texts=tuple(reply.texts),
        declared=reply.declared,
        ocr=ocr_note,
        markdown=reply.markdown,
        refused=tuple(reply.hazards),
    )


def failure_message(failure: Failure, limits: Limits) -> str:
    if failure is Failure.MEMORY:
        return (
            f"reading the PDF needed more than the reader's {limits.memory_bytes // MIB} MiB memory limit "
            "(a decompression bomb, or a stream too large to inflate); it was stopped"
        )
    if failure is Failure.CPU_TIME:
        return (
            f"reading the PDF used more than the reader's {limits.cpu_limit_s:g} s of CPU time; "
            "it was stopped"
        )
    if failure is Failure.WALL_CLOCK:
        return f"reading the PDF took longer than the reader's {limits.wall_s:g} s time limit; it was stopped"
    return "the PDF reader crashed on this document; it was not read"


def first_line(text: str) -> str:
    for line in text.splitlines():
        words = line.split()
        if words:
            return " ".join(words)[:MAX_TITLE_FROM_TEXT]
    return ""


def _stopped_early(reply: Reading) -> bool:
    """Pages were left unread (cap or budget), or some could not be loaded."""
    return (
        reply.pages_read < reply.pages
        or not reply.complete
        or reply.unreadable_pages > 0
        or bool(reply.ocr_unread)
    )


def _hrefs(reply: Reading) -> list[str]:
    """Each page's link annotations, then the https URLs written in its text, page after page."""
    hrefs: list[str] = []
    for text, uris in zip(reply.texts, reply.uris, strict=False):
        hrefs.extend(uris)
        hrefs.extend(urls_in_text(text))
    return hrefs
