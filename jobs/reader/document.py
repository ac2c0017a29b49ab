"""Bytes and a Content-Type header to the readable text fetch_page returns.

The fetch hands over the body it read (already bounded) and the header; this module decides what
the body is (declared, or sniffed when undeclared), decodes it, reduces HTML to readable text
(all of it, or its main content) and returns everything the result needs. Every step of it
(decoding, stripping invisible characters, reducing HTML) runs in slices of a few milliseconds
under one CPU budget (cpu_budget.py), so a hostile body cannot stall the worker's event loop, and
reading stops at the budget with what it has, marked truncated.
"""

from __future__ import annotations

import asyncio
import unicodedata
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from jobs.reader.charset import Flavor, choose, decode_pieces
from jobs.reader.content_types import (
    HTML_TYPES,
    IMAGE_TYPES,
    OFFICE_TYPES,
    PDF,
    SNIFFED_OFFICE,
    DeclaredKind,
    apache_bug_binary,
    declared_kind,
    is_text_essence,
    parse_content_type,
    sniff,
)
from jobs.reader.cpu_budget import SLICE_S, CpuBudget
from jobs.reader.embedded import embedded_documents
from jobs.reader.formats import TEXT, Readable, html_readable, whole_text, whole_text_paced
from jobs.reader.hidden import InvisibleStripper
from jobs.reader.html.reduce import Reducer, Reduction
from jobs.reader.links import LinkResolver, urls_in_text
from jobs.reader.main_content import select_full, select_main
from jobs.reader.metadata.page import html_metadata
from jobs.reader.metadata.pdf import pdf_metadata
from jobs.reader.ocr.ask import OcrAsk
from jobs.reader.pdf.reader import PdfText, first_line, read_pdf
from jobs.reader.pdf.wire import Kind
from jobs.reader.script_shell import is_script_shell, shown_chars
from worker.document_notes import OcrNote
from worker.errors import UnsupportedContentType
from worker.page_metadata import PageMetadata

LINK_BATCH = 100
# Characters of a text body stripped of invisible characters between two pauses: a few ms at most.
STRIP_PIECE = 4096


@dataclass(frozen=True)
class Document:
    content_type: str  # the MIME type, declared or (when undeclared) sniffed, without parameters
    title: str  # the HTML <title>, whitespace collapsed; "" when none and for other text types
    text: str  # the whole text in ``format`` (render_whole), cut at max_chars
    truncated: bool  # the body was cut, the text was cut, or the reduction stopped early
    links: list[str]  # canonical https URLs, distinct, in page order, at most 500
    hidden_removed: int  # characters of hidden text and invisible characters removed
    extraction: str  # "main" or "full"
    pages: int | None = None  # PDFs: the document's page count
    pages_read: int | None = None  # PDFs: pages whose text was extracted (all, unless cut at max_chars)
    unresolved_links: int = 0  # links (and a <base href>) the URL parser could not read: dropped
    # The reading stopped at its CPU budget (or the job's deadline, which shortens the budget):
    # another worker with time to spare would read more, so such a page is never shared. A cut at
    # the byte or character caps is the same for every worker, and may be.
    out_of_time: bool = False
    format: str = TEXT  # "markdown" or "text" (formats.py)
    # What the text is made from, so the whole of it can be rendered again, in either format.
    readable: Readable = field(default=Readable(""), compare=False, repr=False)
    script_shell: bool = False  # HTML: nearly no text, and the markup of an app built by its scripts
    metadata: PageMetadata | None = None  # HTML and PDFs: what the page declares about itself
    ocr: OcrNote | None = None  # scans and images: the pages OCR read
    refused: tuple[str, ...] | None = None  # office documents: the hazards found and not followed
    documents: list[str] = field(default_factory=list)  # HTML: the PDFs it embeds (jobs.reader.embedded)


def render_whole(document: Document, fmt: str) -> str:
    """The document's whole text, uncut, in ``fmt`` ("markdown" or "text"): ``text`` is its first
    ``max_chars`` characters when ``fmt`` is the document's own format."""
    return whole_text(document.readable, fmt)


async def build_document(
    body: bytes,
    content_type: str | None,
    url: str,
    *,
    extract: str,
    max_chars: int,
    cpu_budget_s: float,
    body_truncated: bool,
    until: float | None = None,
    format: str = TEXT,
    content_language: str | None = None,
    ocr: OcrAsk | None = None,
) -> Document:
    """Raise UnsupportedContentType when the body is neither text nor a PDF: declared so, or sniffed so.

    A PDF is read in the PDF pool (charged to the URL's site), never in the worker: ``until`` (loop
    time) is the job's deadline, which shortens the budget of a PDF that waited for a child. So
    are images (by OCR, with ``ocr``) and office documents (jobs/reader/office).
    """
    essence, charset = _text_type(body, content_type)
    kind = _child_kind(essence)
    if kind is not None:
        site = urlsplit(url).hostname or ""
        pdf = await read_pdf(
            body,
            max_chars=max_chars,
            cpu_budget_s=cpu_budget_s,
            cost_key=site,
            until=until,
            ocr=ocr,
            kind=kind,
        )
        if kind is Kind.OFFICE:
            return await _office_document(essence, pdf, url, max_chars, format)
        readable = Readable(pdf.text, pages=pdf.page_texts)
        whole = whole_text(readable, format)
        cut = cut_text(whole, max_chars)
        metadata, invisible = pdf_metadata(pdf.declared)
        return Document(
            content_type=essence,
            title=pdf.title,
            text=cut,
            truncated=pdf.stopped_early or len(cut) < len(whole),
            links=await harvest_links(pdf.hrefs, None, url),
            hidden_removed=pdf.hidden_removed + invisible,
            extraction="full",  # extract has no effect on a PDF
            pages=pdf.pages,
            pages_read=pdf.pages_read,
            # OCR that stopped short (time, or this report's OCR budget) is not to be shared either.
            out_of_time=pdf.out_of_time or (pdf.ocr is not None and "unread_from" in pdf.ocr),
            format=format,
            readable=readable,
            metadata=metadata,
            ocr=pdf.ocr,
        )
    budget = CpuBudget(cpu_budget_s)
    flavor = _flavor(essence)
    decoded = await decode_paced(body, charset, flavor, budget)
    if flavor != "html":
        text, invisible, complete = await strip_paced(decoded, budget)
        readable = Readable(text)
        whole = whole_text(readable, format)
        cut = cut_text(whole, max_chars)
        resolver = await _harvest(urls_in_text(text), None, url)
        return Document(
            content_type=essence,
            title="",
            text=cut,
            truncated=body_truncated or not complete or len(cut) < len(whole),
            links=resolver.links,
            hidden_removed=invisible,
            extraction="full",
            unresolved_links=resolver.unresolved,
            out_of_time=not complete,
            format=format,
            readable=readable,
        )
    reduction = await reduce_html(decoded, budget)
    selection = select_main(reduction) if extract == "main" else select_full(reduction)
    await asyncio.sleep(0)
    resolver = await _harvest(reduction.hrefs, reduction.base_href, url)
    readable = html_readable(selection.blocks, reduction.hrefs, resolver.canonical, resolver.links)
    whole = await whole_text_paced(readable, format, budget)
    cut = cut_text(whole, max_chars)
    metadata, invisible = await html_metadata(reduction, url, content_language, budget)
    return Document(
        content_type=essence,
        title=reduction.title,
        text=cut,
        truncated=body_truncated or not reduction.complete or len(cut) < len(whole),
        links=resolver.links,
        hidden_removed=reduction.hidden_removed + invisible,
        extraction=selection.extraction,
        unresolved_links=resolver.unresolved,
        # Not complete is the budget or the block cap; only the budget is a matter of time.
        out_of_time=not reduction.complete and budget.exhausted,
        format=format,
        readable=readable,
        metadata=metadata,
        documents=embedded_documents(reduction.embeds, reduction.base_href, url),
        script_shell=is_script_shell(
            reduction.shell,
            shown_chars(reduction.blocks),
            sum(len(block.text) for block in reduction.blocks),
        ),
    )


def reads_in_child(body: bytes, content_type: str | None) -> bool:
    """Whether the body is a PDF (an image, an office document), read in the PDF pool rather than
    in the worker's CPU slots."""
    try:
        return _child_kind(_text_type(body, content_type)[0]) is not None
    except UnsupportedContentType:
        return False


def _child_kind(essence: str) -> Kind | None:
    if essence == PDF:
        return Kind.PDF
    if essence in IMAGE_TYPES:
        return Kind.IMAGE
    if essence in OFFICE_TYPES or essence == SNIFFED_OFFICE:
        return Kind.OFFICE
    return None


async def _office_document(essence: str, office: PdfText, url: str, max_chars: int, fmt: str) -> Document:
    readable = Readable(office.text, markdown=office.markdown)
    whole = whole_text(readable, fmt)
    cut = cut_text(whole, max_chars)
    return Document(
        content_type=essence,
        title=first_line(office.text),
        text=cut,
        truncated=office.stopped_early or len(cut) < len(whole),
        links=await harvest_links([], None, url),
        hidden_removed=office.hidden_removed,
        extraction="full",
        format=fmt,
        readable=readable,
        refused=office.refused or None,
    )


def _text_type(body: bytes, content_type: str | None) -> tuple[str, str | None]:
    """The body's MIME type and declared charset; raise when it is neither text nor a PDF."""
    kind = declared_kind(content_type)
    if kind is DeclaredKind.PDF:
        return PDF, None
    if kind is DeclaredKind.DOCUMENT:
        parsed = parse_content_type(content_type)
        assert parsed is not None
        return parsed.essence, None
    if kind is DeclaredKind.UNDECLARED:
        sniffed = sniff(body)
        if not is_text_essence(sniffed) and _child_kind(sniffed) is None:
            raise UnsupportedContentType(
                f"the body is {sniffed}, neither text nor a PDF (no usable Content-Type was sent)"
            )
        return sniffed, None
    parsed = parse_content_type(content_type)
    assert parsed is not None
    if kind is DeclaredKind.BINARY:
        raise UnsupportedContentType(f"the page is {parsed.essence}, neither text nor a PDF")
    if apache_bug_binary(content_type, body):
        raise UnsupportedContentType("the body is binary although it was labelled text/plain")
    return parsed.essence, parsed.charset


def _flavor(essence: str) -> Flavor:
    if essence in HTML_TYPES:
        return "html"
    if essence.endswith(("/xml", "+xml")):
        return "xml"
    return "other"


async def decode_paced(body: bytes, charset: str | None, flavor: Flavor, budget: CpuBudget) -> str:
    """The body as text (charset.py's order), 64 KB at a time; decoding always runs to the end,
    since it is bounded by the byte cap and everything after it needs the text."""
    choice = choose(body, charset, flavor)
    await budget.pause()
    pieces: list[str] = []
    for piece in decode_pieces(body, choice):
        pieces.append(piece)
        await budget.pause()
    return "".join(pieces)


async def strip_paced(text: str, budget: CpuBudget) -> tuple[str, int, bool]:
    """A text body without invisible characters, how many were removed, and whether it was read
    to the end (it stops where the CPU budget runs out)."""
    stripper = InvisibleStripper()
    pieces: list[str] = []
    for start in range(0, len(text), STRIP_PIECE):
        pieces.append(stripper.feed(text[start : start + STRIP_PIECE]))
        await budget.pause()
        if budget.exhausted and start + STRIP_PIECE < len(text):
            return "".join(pieces), stripper.removed, False
    stripper.finish()
    return "".join(pieces), stripper.removed, True


async def reduce_html(html: str, budget: CpuBudget) -> Reduction:
    """Reduce in slices, yielding to the event loop between them, until done or out of budget."""
    reducer = Reducer(html)
    await budget.pause()
    while not reducer.run(SLICE_S):
        await budget.pause()
        if budget.exhausted:
            reducer.finish()
            break
    await budget.pause()
    return reducer.result()


async def harvest_links(hrefs: list[str], base_href: str | None, url: str) -> list[str]:
    """Canonical https links, a batch at a time: each costs a canonical parse of tens of µs."""
    return (await _harvest(hrefs, base_href, url)).links


async def _harvest(hrefs: list[str], base_href: str | None, url: str) -> LinkResolver:
    resolver = LinkResolver(base_href, url)
    for start in range(0, len(hrefs), LINK_BATCH):
        if resolver.add(hrefs[start : start + LINK_BATCH]):
            break
        await asyncio.sleep(0)
    return resolver


def cut_text(text: str, max_chars: int) -> str:
    """At most ``max_chars`` characters, never ending between a letter and its combining marks."""
    if len(text) <= max_chars:
        return text
    end = max_chars
    # Back off to the start of the character's cluster, but not forever: a "cluster" of thousands
    # of stacked accents is an attack on renderers, and is cut like anything else.
    floor = max(0, max_chars - 32)
    while end > floor and (unicodedata.combining(text[end]) or text[end] in "\u200d\ufe0f"):
        end -= 1
    return text[:end] if end > floor else text[:max_chars]
