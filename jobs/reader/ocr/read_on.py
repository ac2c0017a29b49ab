"""Reading on in a scan: a piece or a find that reaches past the pages a fetch OCR'd reads them then.

The first fetch of a scan reads the pages its deadline and the report's OCR budget allow; what it
read is a prefix of the document (``run.py``), and its bytes are kept beside its kept document
(``worker.state.pages.scans``). A continuation that needs more (a find, which searches the whole
document, or a piece that runs past the text read) OCRs on from the first unread page within its
own deadline, joins the new pages to the old, and keeps the longer document in place of the
shorter one for the report: the text read before is unchanged, so earlier pieces stay pieces of it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from jobs.reader.formats import FORMATS, Readable, page_offsets, whole_text
from jobs.reader.ocr.ask import OcrAsk
from jobs.reader.pdf.reader import read_pdf
from jobs.reader.pdf.wire import Kind
from worker.document_notes import OcrNote
from worker.errors import UnsupportedContentType
from worker.limits import MAX_DOCUMENT_CHARS, MAX_PAGE_OFFSETS
from worker.state.pages.documents import Kept, KeptDocuments
from worker.state.pages.entry import Page
from worker.state.pages.scans import Scans


@dataclass(frozen=True)
class ReadOn:
    page: Page  # the kept page's record, its OCR note and page counts brought up to date
    texts: dict[str, str]  # the whole text in each format
    offsets: dict[str, tuple[int, ...] | None]


def wants_more(kept: Kept, name: str, *, offset: int, max_chars: int, find: bool) -> bool:
    """Whether this continuation reaches past what OCR has read of the kept document."""
    note = kept.page.ocr
    if note is None or "unread_from" not in note or name not in kept.layouts:
        return False
    return find or offset + max_chars > kept.layouts[name].total_chars


async def read_on(
    kept: Kept,
    scans: Scans,
    documents: KeptDocuments,
    ocr: OcrAsk,
    *,
    until: float,
    cpu_budget_s: float,
    noted_for: tuple[str, str, str],
) -> ReadOn | None:
    """OCR the next pages of the kept scan and keep the longer document for the report; None when
    the scan's bytes are no longer kept (the continuation then reads what there is)."""
    stored = await scans.load(kept.digest)
    if stored is None or kept.page.ocr is None:
        return None
    body, before = stored
    kind = Kind.IMAGE if kept.page.content_type.startswith("image/") else Kind.PDF
    try:
        pdf = await read_pdf(
            body,
            max_chars=MAX_DOCUMENT_CHARS,
            cpu_budget_s=cpu_budget_s,
            cost_key=urlsplit(kept.page.final_url).hostname or "",
            until=until,
            ocr=ocr,
            kind=kind,
            from_page=len(before),
        )
    except UnsupportedContentType:
        return None  # no page more could be read (the OCR budget is spent): what was read stands
    pages = [*before, *pdf.page_texts[len(before) :]]
    note = _joined(kept.page.ocr, pdf.ocr)
    readable = Readable("\n\n".join(page for page in pages if page), pages=pages)
    texts = {name: whole_text(readable, name)[:MAX_DOCUMENT_CHARS] for name in FORMATS}
    offsets: dict[str, tuple[int, ...] | None] = {}
    for name, text in texts.items():
        found = page_offsets(readable, name) or []
        offsets[name] = tuple(at for at in found[:MAX_PAGE_OFFSETS] if at <= len(text))
    page = replace(
        kept.page,
        ocr=note,
        pages_read=pdf.pages_read,
        truncated=pdf.stopped_early,
        document=None,
    )
    keeping = await documents.prepare(page, texts, offsets, noted_for=noted_for)
    if await keeping.keep() and "unread_from" in note:
        await scans.keep(keeping.digest, body, pages)
    return ReadOn(replace(page, document=keeping.digest), texts, offsets)


def _joined(before: OcrNote, now: OcrNote | None) -> OcrNote:
    """The OCR note of both reads: every page OCR read, and where the reading stops now."""
    if now is None:
        return OcrNote(
            pages=before["pages"],
            engine=before["engine"],
            languages=before["languages"],
            mean_confidence=before["mean_confidence"],
        )
    count_before, count_now = len(before["pages"]), len(now["pages"])
    total = count_before + count_now
    mean = (
        (before["mean_confidence"] * count_before + now["mean_confidence"] * count_now) / total
        if total
        else 0.0
    )
    joined = OcrNote(
        pages=[*before["pages"], *now["pages"]],
        engine=now["engine"] if count_now else before["engine"],
        languages=now["languages"],
        mean_confidence=round(mean, 1),
    )
    if "unread_from" in now:
        joined["unread_from"] = now["unread_from"]
        joined["stopped"] = now.get("stopped", "time")
    return joined
