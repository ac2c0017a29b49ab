"""The page a fetch makes from its response: the document reduced within the job's CPU, its whole
text in both formats (what is kept for the report's continuations), and the page's record."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt

from jobs.fetcher import Fetched
from jobs.reader.cpu_budget import CpuBudget
from jobs.reader.document import Document, build_document, cut_text, reads_in_child
from jobs.reader.formats import FORMATS, page_offsets, whole_text_paced
from jobs.reader.ocr.ask import OcrAsk
from jobs.reading import InHand
from worker.guardian.urls import Target
from worker.limits import MAX_DOCUMENT_CHARS, MAX_PAGE_OFFSETS
from worker.runtime.context import JobContext
from worker.state.pages.entry import Page

# The least CPU a reduction gets, however late its slot came: enough for a first slice of text.
MIN_REDUCE_S = 0.05


async def reduce(
    job: JobContext, fetched: Fetched, *, extract: str, fmt: str, until: float, ocr: OcrAsk | None = None
) -> Document:
    """The response read into a document, in one of the worker's CPU slots (worker.runtime.cpu_slots:
    smallest body first, small ones in a lane of their own). A page that waited long for its slot
    reduces with the time it has left, and comes back truncated rather than not at all. A PDF takes
    no slot: it is read in the PDF pool's children, which queue by cost of their own
    (jobs.reader.pdf.schedule)."""
    in_child = reads_in_child(fetched.body, fetched.content_type)
    slot = contextlib.nullcontext() if in_child else job.runtime.cpu_slots.slot(len(fetched.body))
    async with slot:
        left = until - asyncio.get_running_loop().time()
        return await build_document(
            fetched.body,
            fetched.content_type,
            fetched.final.url,
            extract=extract,
            max_chars=MAX_DOCUMENT_CHARS,
            cpu_budget_s=max(MIN_REDUCE_S, min(job.settings.reduce_cpu_budget_s, left)),
            body_truncated=fetched.truncated,
            until=until,
            format=fmt,
            content_language=fetched.content_language,
            ocr=ocr,
        )


async def in_both_formats(document: Document, cpu_budget_s: float) -> InHand:
    """The document's whole text in each format (what it was read in, and the other rendered from
    the same reduction, paced), with each format's PDF page offsets: what is kept for its pieces."""
    texts = {document.format: document.text}
    budget = CpuBudget(cpu_budget_s)
    for name in FORMATS:
        if name not in texts:
            texts[name] = cut_text(
                await whole_text_paced(document.readable, name, budget), MAX_DOCUMENT_CHARS
            )
    offsets: dict[str, tuple[int, ...] | None] = {}
    for name, text in texts.items():
        found = page_offsets(document.readable, name)
        offsets[name] = (
            None if found is None else tuple(at for at in found[:MAX_PAGE_OFFSETS] if at <= len(text))
        )
    return InHand(texts, offsets)


def page_of(target: Target, fetched: Fetched, document: Document, max_chars: int) -> Page:
    """The reduced page as the cache keeps it, fetched now: its first piece of text, and the kept
    document that holds the whole."""
    pages_read = document.pages_read if document.pages_read is not None else document.pages
    return Page(
        url=target.url,
        final_url=fetched.final.url,
        status=fetched.status,
        content_type=document.content_type,
        title=document.title,
        text=cut_text(document.text, max_chars),
        truncated=document.truncated,
        redirects=fetched.redirects,
        bytes_read=len(fetched.body),
        fetched_at=dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        extraction=document.extraction,
        links=tuple(document.links),
        hidden_removed=document.hidden_removed,
        pages=document.pages,
        pages_read=pages_read if document.pages is not None else None,
        metadata=document.metadata,
        script_shell=document.script_shell,
        ocr=document.ocr,
        refused=document.refused,
        documents=tuple(document.documents),
    )
